"""An infrastructure-as-a-service console: projects with quotas, VM instances, images, persistent
disks, snapshots and usage metering.

Quota usage is tracked per project: running instances consume vCPU and memory quota, every
instance counts toward the instance quota, every disk's size toward the disk quota and every
snapshot toward the snapshot quota. Billing cycles meter running instances and stored bytes.
"""

import datetime
import re


DISK_TYPES = ("pd-standard", "pd-balanced", "pd-ssd")
MAX_ATTACHED = 8
MAX_DISK_GB = 4096
HOURS_PER_MONTH = 730
_NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


class CloudVMs:
    """Projects, quotas, instances, disks, snapshots and billing meters."""

    def __init__(self, init_config: dict):
        self.zones = {}
        self.machine_types = {}
        self.images = {}
        self.pricing = {}
        self.projects = {}
        self.instances = {}
        self.disks = {}
        self.snapshots = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers

    @staticmethod
    def _fail(msg):
        return {"success": False, "error": msg}

    @staticmethod
    def _require_str(**params):
        """Return a failure for the first argument that is not a string, else None."""
        for name, value in params.items():
            if not isinstance(value, str):
                return {"success": False, "error": f"{name} must be a string"}
        return None

    @staticmethod
    def _now():
        return datetime.datetime.now().replace(microsecond=0).isoformat()

    def _project(self, project_id):
        p = self.projects.get(project_id) if isinstance(project_id, str) else None
        if p is None:
            return None, self._fail(f"project {project_id} not found")
        if p["status"] != "active":
            return None, self._fail(f"project {project_id} is {p['status']}")
        return p, None

    def _instance(self, instance_id):
        i = self.instances.get(instance_id) if isinstance(instance_id, str) else None
        if i is None:
            return None, self._fail(f"instance {instance_id} not found")
        return i, None

    def _quota_err(self, p, **need):
        for k, v in need.items():
            if p["usage"][k] + v > p["quotas"][k]:
                return (f"quota exceeded: {k} would be {p['usage'][k] + v} of {p['quotas'][k]} "
                        f"(currently {p['usage'][k]})")
        return None

    @staticmethod
    def _valid_name(name):
        return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None

    def _next(self, counter, prefix):
        self.counters[counter] += 1
        return f"{prefix}-{self.counters[counter]}"

    # ------------------------------------------------------------------ queries

    def get_project(self, project_id: str) -> dict:
        """Return a project's quotas, current usage, remaining headroom and month-to-date spend.

        Args:
            project_id: Project id, e.g. "atlas-prod".
        """
        err = self._require_str(project_id=project_id)
        if err:
            return err
        p = self.projects.get(project_id)
        if p is None:
            return self._fail(f"project {project_id} not found")
        headroom = {k: p["quotas"][k] - p["usage"][k] for k in p["quotas"]}
        data = dict(p)
        data["project_id"] = project_id
        data["headroom"] = headroom
        return {"success": True, "data": data}

    def list_instances(self, project_id: str) -> dict:
        """List a project's instances with machine type, status, zone and attached disks.

        Args:
            project_id: Project id.
        """
        err = self._require_str(project_id=project_id)
        if err:
            return err
        if project_id not in self.projects:
            return self._fail(f"project {project_id} not found")
        rows = []
        for iid in sorted(self.instances):
            i = self.instances[iid]
            if i["project"] == project_id:
                rows.append({"instance_id": iid, "name": i["name"], "zone": i["zone"],
                             "machine_type": i["machine_type"],
                             "status": i["status"], "boot_disk": i["boot_disk"],
                             "attached_disks": sorted(i["attached_disks"]), "billed_hours": i["billed_hours"]})
        return {"success": True, "data": rows}

    def list_catalog(self) -> dict:
        """List zones, machine types (vCPUs, memory, hourly price), images and disk prices."""
        return {"success": True, "data": {
            "zones": {z: v["status"] for z, v in sorted(self.zones.items())},
            "machine_types": [dict(v, name=k) for k, v in sorted(self.machine_types.items())],
            "images": [{"image_id": k, "name": v["name"], "os": v["os"], "min_disk_gb": v["min_disk_gb"],
                        "status": v["status"]} for k, v in sorted(self.images.items())],
            "pricing": self.pricing}}

    # ------------------------------------------------------------------ updates

    def create_instance(self, project_id: str, name: str, zone: str, machine_type: str, image_id: str,
                        boot_disk_gb: int = 20, disk_type: str = "pd-balanced") -> dict:
        """Create and start a VM instance with a new boot disk built from an image.

        Args:
            project_id: Active project id.
            name: Instance name: lowercase letters, digits and hyphens, starts with a letter,
                at most 63 characters, unique within the project.
            zone: A zone whose status is UP, e.g. "europe-west1-b".
            machine_type: Machine type name, e.g. "e2-standard-4".
            image_id: An active (not deprecated) image id.
            boot_disk_gb: Boot disk size; at least the image's minimum, at most 4096.
            disk_type: pd-standard, pd-balanced (default) or pd-ssd.
        Quotas checked: instances +1, vcpus and memory_gb of the machine type, disk_gb of the
        boot disk. The boot disk is named after the instance.
        """
        err = self._require_str(
            project_id=project_id, name=name, zone=zone, machine_type=machine_type, image_id=image_id,
            disk_type=disk_type)
        if err:
            return err
        p, err = self._project(project_id)
        if err:
            return err
        if not self._valid_name(name):
            return self._fail(f"invalid instance name '{name}'")
        if any(i["project"] == project_id and i["name"] == name for i in self.instances.values()):
            return self._fail(f"an instance named '{name}' already exists in {project_id}")
        z = self.zones.get(zone)
        if z is None:
            return self._fail(f"zone {zone} not found")
        if z["status"] != "UP":
            return self._fail(f"zone {zone} is {z['status']} and not accepting new instances")
        mt = self.machine_types.get(machine_type)
        if mt is None:
            return self._fail(f"machine type {machine_type} not found")
        img = self.images.get(image_id)
        if img is None:
            return self._fail(f"image {image_id} not found")
        if img["status"] != "active":
            return self._fail(f"image {image_id} is {img['status']}; choose a current image")
        if not isinstance(boot_disk_gb, int) or isinstance(boot_disk_gb, bool):
            return self._fail("boot_disk_gb must be an integer")
        if not (img["min_disk_gb"] <= boot_disk_gb <= MAX_DISK_GB):
            return self._fail(f"boot disk must be {img['min_disk_gb']}-{MAX_DISK_GB} GB for image {image_id}")
        if disk_type not in DISK_TYPES:
            return self._fail(f"invalid disk type '{disk_type}'; expected one of {', '.join(DISK_TYPES)}")
        err = self._quota_err(p, instances=1, vcpus=mt["vcpus"], memory_gb=mt["memory_gb"], disk_gb=boot_disk_gb)
        if err:
            return self._fail(err)
        iid = self._next("instance", "vm")
        did = self._next("disk", "disk")
        now = self._now()
        self.disks[did] = {"project": project_id, "name": name, "zone": zone, "size_gb": boot_disk_gb,
                           "type": disk_type, "status": "in_use", "attached_to": iid, "boot": True,
                           "source_image": image_id, "source_snapshot": None}
        self.instances[iid] = {"project": project_id, "name": name, "zone": zone, "machine_type": machine_type,
                               "status": "running", "image": image_id, "boot_disk": did, "attached_disks": {},
                               "billed_hours": 0, "deletion_protection": False, "created_at": now}
        u = p["usage"]
        u["instances"] += 1
        u["vcpus"] += mt["vcpus"]
        u["memory_gb"] += mt["memory_gb"]
        u["disk_gb"] += boot_disk_gb
        return {"success": True, "message": f"Instance {name} ({iid}) is running in {zone}",
                "instance_id": iid, "boot_disk": did}

    def start_instance(self, instance_id: str) -> dict:
        """Start a stopped instance; its vCPUs and memory must fit in the project quota.

        Args:
            instance_id: Instance id, e.g. "vm-1004".
        """
        err = self._require_str(instance_id=instance_id)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        p, err = self._project(i["project"])
        if err:
            return err
        if i["status"] != "stopped":
            return self._fail(f"instance {instance_id} is {i['status']}, not stopped")
        if self.zones[i["zone"]]["status"] != "UP":
            return self._fail(f"zone {i['zone']} is {self.zones[i['zone']]['status']}")
        mt = self.machine_types[i["machine_type"]]
        err = self._quota_err(p, vcpus=mt["vcpus"], memory_gb=mt["memory_gb"])
        if err:
            return self._fail(err)
        i["status"] = "running"
        p["usage"]["vcpus"] += mt["vcpus"]
        p["usage"]["memory_gb"] += mt["memory_gb"]
        return {"success": True, "message": f"Instance {instance_id} started"}

    def stop_instance(self, instance_id: str) -> dict:
        """Stop a running instance, releasing its vCPU and memory quota (disks are kept).

        Args:
            instance_id: Instance id.
        """
        err = self._require_str(instance_id=instance_id)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        if i["status"] != "running":
            return self._fail(f"instance {instance_id} is {i['status']}, not running")
        mt = self.machine_types[i["machine_type"]]
        p = self.projects[i["project"]]
        i["status"] = "stopped"
        p["usage"]["vcpus"] -= mt["vcpus"]
        p["usage"]["memory_gb"] -= mt["memory_gb"]
        return {"success": True, "message": f"Instance {instance_id} stopped"}

    def resize_instance(self, instance_id: str, machine_type: str) -> dict:
        """Change a stopped instance's machine type.

        Args:
            instance_id: Instance id; the instance must be stopped.
            machine_type: New machine type name; must differ from the current one.
        Rules: the new type's vCPUs and memory must fit in the project quota so that the
        instance can be started again.
        """
        err = self._require_str(instance_id=instance_id, machine_type=machine_type)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        if i["status"] != "stopped":
            return self._fail(f"instance {instance_id} must be stopped before resizing (it is {i['status']})")
        mt = self.machine_types.get(machine_type)
        if mt is None:
            return self._fail(f"machine type {machine_type} not found")
        if machine_type == i["machine_type"]:
            return self._fail(f"instance {instance_id} already uses {machine_type}")
        p = self.projects[i["project"]]
        err = self._quota_err(p, vcpus=mt["vcpus"], memory_gb=mt["memory_gb"])
        if err:
            return self._fail(f"new machine type would not fit when started: {err}")
        old = i["machine_type"]
        i["machine_type"] = machine_type
        return {"success": True, "message": f"Instance {instance_id} resized from {old} to {machine_type}"}

    def create_disk(self, project_id: str, name: str, zone: str, size_gb: int, disk_type: str = "pd-balanced",
                    snapshot_id: str = "") -> dict:
        """Create an unattached persistent disk, empty or restored from a snapshot.

        Args:
            project_id: Active project id.
            name: Disk name (same naming rules as instances), unique within the project.
            zone: Zone for the disk (must be UP).
            size_gb: Size in GB, 10-4096; at least the snapshot size when restoring.
            disk_type: pd-standard, pd-balanced (default) or pd-ssd.
            snapshot_id: Optional snapshot of the same project to restore from.
        """
        err = self._require_str(
            project_id=project_id, name=name, zone=zone, disk_type=disk_type, snapshot_id=snapshot_id)
        if err:
            return err
        p, err = self._project(project_id)
        if err:
            return err
        if not self._valid_name(name):
            return self._fail(f"invalid disk name '{name}'")
        if any(d["project"] == project_id and d["name"] == name for d in self.disks.values()):
            return self._fail(f"a disk named '{name}' already exists in {project_id}")
        z = self.zones.get(zone)
        if z is None or z["status"] != "UP":
            return self._fail(f"zone {zone} is not available")
        if not isinstance(size_gb, int) or isinstance(size_gb, bool) or not (10 <= size_gb <= MAX_DISK_GB):
            return self._fail(f"size_gb must be an integer from 10 to {MAX_DISK_GB}")
        if disk_type not in DISK_TYPES:
            return self._fail(f"invalid disk type '{disk_type}'; expected one of {', '.join(DISK_TYPES)}")
        if snapshot_id:
            snap = self.snapshots.get(snapshot_id)
            if snap is None:
                return self._fail(f"snapshot {snapshot_id} not found")
            if snap["project"] != project_id:
                return self._fail(f"snapshot {snapshot_id} belongs to project {snap['project']}")
            if size_gb < snap["size_gb"]:
                return self._fail(f"disk must be at least {snap['size_gb']} GB to restore snapshot {snapshot_id}")
        err = self._quota_err(p, disk_gb=size_gb)
        if err:
            return self._fail(err)
        did = self._next("disk", "disk")
        self.disks[did] = {"project": project_id, "name": name, "zone": zone, "size_gb": size_gb, "type": disk_type,
                           "status": "ready", "attached_to": None, "boot": False, "source_image": None,
                           "source_snapshot": snapshot_id or None}
        p["usage"]["disk_gb"] += size_gb
        return {"success": True, "message": f"Disk {name} ({did}) created", "disk_id": did}

    def attach_disk(self, instance_id: str, disk_id: str, mode: str = "rw") -> dict:
        """Attach a ready data disk to an instance in the same project and zone.

        Args:
            instance_id: Instance id.
            disk_id: Disk id of an unattached, non-boot disk.
            mode: "rw" (default) or "ro".
        Rules: at most 8 data disks per instance; the device name is the next free sdb..sdi.
        """
        err = self._require_str(instance_id=instance_id, disk_id=disk_id, mode=mode)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        d = self.disks.get(disk_id)
        if d is None:
            return self._fail(f"disk {disk_id} not found")
        if mode not in ("rw", "ro"):
            return self._fail("mode must be 'rw' or 'ro'")
        if d["project"] != i["project"]:
            return self._fail(f"disk {disk_id} belongs to project {d['project']}, instance to {i['project']}")
        if d["zone"] != i["zone"]:
            return self._fail(f"disk {disk_id} is in {d['zone']} but the instance is in {i['zone']}")
        if d["boot"]:
            return self._fail(f"disk {disk_id} is a boot disk")
        if d["status"] != "ready":
            return self._fail(f"disk {disk_id} is {d['status']} (attached to {d['attached_to']})")
        if len(i["attached_disks"]) >= MAX_ATTACHED:
            return self._fail(f"instance {instance_id} already has {MAX_ATTACHED} data disks")
        used = {a["device"] for a in i["attached_disks"].values()}
        device = next(f"sd{c}" for c in "bcdefghi" if f"sd{c}" not in used)
        i["attached_disks"][disk_id] = {"device": device, "mode": mode}
        d["status"] = "in_use"
        d["attached_to"] = instance_id
        return {"success": True, "message": f"Disk {disk_id} attached to {instance_id} as /dev/{device}",
                "device": device}

    def detach_disk(self, instance_id: str, disk_id: str) -> dict:
        """Detach a data disk from an instance; the disk becomes ready again.

        Args:
            instance_id: Instance id.
            disk_id: An attached data disk (boot disks cannot be detached).
        """
        err = self._require_str(instance_id=instance_id, disk_id=disk_id)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        if disk_id == i["boot_disk"]:
            return self._fail(f"disk {disk_id} is the boot disk of {instance_id} and cannot be detached")
        if disk_id not in i["attached_disks"]:
            return self._fail(f"disk {disk_id} is not attached to {instance_id}")
        del i["attached_disks"][disk_id]
        self.disks[disk_id]["status"] = "ready"
        self.disks[disk_id]["attached_to"] = None
        return {"success": True, "message": f"Disk {disk_id} detached from {instance_id}"}

    def create_snapshot(self, disk_id: str, name: str) -> dict:
        """Take a snapshot of a disk (boot or data, attached or not).

        Args:
            disk_id: Disk id.
            name: Snapshot name (naming rules as instances), unique within the project.
        Rules: counts against the project's snapshot quota; the snapshot records the disk's size.
        """
        err = self._require_str(disk_id=disk_id, name=name)
        if err:
            return err
        d = self.disks.get(disk_id)
        if d is None:
            return self._fail(f"disk {disk_id} not found")
        p, err = self._project(d["project"])
        if err:
            return err
        if not self._valid_name(name):
            return self._fail(f"invalid snapshot name '{name}'")
        if any(s["project"] == d["project"] and s["name"] == name for s in self.snapshots.values()):
            return self._fail(f"a snapshot named '{name}' already exists in {d['project']}")
        err = self._quota_err(p, snapshots=1)
        if err:
            return self._fail(err)
        sid = self._next("snapshot", "snap")
        self.snapshots[sid] = {"project": d["project"], "name": name, "source_disk": disk_id,
                               "size_gb": d["size_gb"], "status": "ready", "created_at": self._now()}
        p["usage"]["snapshots"] += 1
        return {"success": True, "message": f"Snapshot {name} ({sid}) of {disk_id} created", "snapshot_id": sid}

    def delete_instance(self, instance_id: str, keep_boot_disk: bool = False) -> dict:
        """Delete an instance, detaching its data disks and deleting (or keeping) its boot disk.

        Args:
            instance_id: Instance id.
            keep_boot_disk: Keep the boot disk as a ready, unattached disk instead of deleting it.
        Rules: instances with deletion protection cannot be deleted.
        Effects: instance quota and, if it was running, vCPU and memory quota are released; data
        disks become ready; a deleted boot disk releases its disk quota.
        """
        err = self._require_str(instance_id=instance_id)
        if err:
            return err
        i, err = self._instance(instance_id)
        if err:
            return err
        if not isinstance(keep_boot_disk, bool):
            return self._fail("keep_boot_disk must be a boolean")
        if i["deletion_protection"]:
            return self._fail(f"instance {instance_id} has deletion protection enabled")
        p = self.projects[i["project"]]
        mt = self.machine_types[i["machine_type"]]
        if i["status"] == "running":
            p["usage"]["vcpus"] -= mt["vcpus"]
            p["usage"]["memory_gb"] -= mt["memory_gb"]
        for did in sorted(i["attached_disks"]):
            self.disks[did]["status"] = "ready"
            self.disks[did]["attached_to"] = None
        boot = i["boot_disk"]
        if keep_boot_disk:
            self.disks[boot]["status"] = "ready"
            self.disks[boot]["attached_to"] = None
            self.disks[boot]["boot"] = False
        else:
            p["usage"]["disk_gb"] -= self.disks[boot]["size_gb"]
            del self.disks[boot]
        p["usage"]["instances"] -= 1
        detached = sorted(i["attached_disks"])
        del self.instances[instance_id]
        return {"success": True, "message": f"Instance {instance_id} deleted",
                "detached_disks": detached, "boot_disk_kept": keep_boot_disk}

    def run_billing_cycle(self, project_id: str, hours: int) -> dict:
        """Meter a project's usage for a number of hours and add the cost to its spend.

        Args:
            project_id: Project id (active or suspended).
            hours: Hours to meter, 1-744.
        Effects: every running instance accrues billed hours; compute cost is hours x hourly
        price of each running instance; storage cost is (disk GB x disk-type price + snapshot GB
        x snapshot price) per GB-month prorated over 730 hours. Costs are rounded to cents. The
        project is flagged over_budget once spend exceeds its monthly budget.
        """
        err = self._require_str(project_id=project_id)
        if err:
            return err
        p = self.projects.get(project_id)
        if p is None:
            return self._fail(f"project {project_id} not found")
        if not isinstance(hours, int) or isinstance(hours, bool) or not (1 <= hours <= 744):
            return self._fail("hours must be an integer from 1 to 744")
        compute = 0.0
        running = []
        for iid in sorted(self.instances):
            i = self.instances[iid]
            if i["project"] == project_id and i["status"] == "running":
                i["billed_hours"] += hours
                compute += self.machine_types[i["machine_type"]]["hourly_usd"] * hours
                running.append(iid)
        storage = 0.0
        for d in self.disks.values():
            if d["project"] == project_id:
                storage += d["size_gb"] * self.pricing["disk_gb_month"][d["type"]] * hours / HOURS_PER_MONTH
        for s in self.snapshots.values():
            if s["project"] == project_id:
                storage += s["size_gb"] * self.pricing["snapshot_gb_month"] * hours / HOURS_PER_MONTH
        compute, storage = round(compute, 2), round(storage, 2)
        spend = p["spend"]
        spend["compute_usd"] = round(spend["compute_usd"] + compute, 2)
        spend["storage_usd"] = round(spend["storage_usd"] + storage, 2)
        spend["hours_metered"] += hours
        total = round(spend["compute_usd"] + spend["storage_usd"], 2)
        if total > p["budget_usd"] and not p["over_budget"]:
            p["over_budget"] = True
        return {"success": True, "message": f"Metered {hours} h for {project_id}",
                "compute_usd": compute, "storage_usd": storage, "instances_metered": running,
                "month_to_date_usd": total, "over_budget": p["over_budget"]}
