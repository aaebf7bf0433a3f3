"""Container terminal customs system: vessels, containers and their cargo manifests, tariff
lookups by HS code, duty and VAT assessment, payment from importer deferment accounts,
inspections, demurrage, customs release and gate-out."""

import copy
import datetime
import re
import uuid

INSPECTION_FEES = {"documentary": 0.0, "xray": 85.0, "physical": 350.0}
DISCREPANCY_PENALTY = 500.0
YARD_SLOT = re.compile(r"^[A-Z]\d{2}-\d{2}-[1-5]$")
TRUCK_PLATE = re.compile(r"^[A-Z0-9]{2,4} ?[A-Z0-9]{3}$")


def _money(x):
    return round(float(x) + 0.0, 2)


def _date(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.date.fromisoformat(value)
    except ValueError:
        return None


class PortCustoms:
    def __init__(self, init_config: dict):
        self.tariff = {}
        self.demurrage_tariff = {}
        self.importers = {}
        self.vessels = {}
        self.containers = {}
        self.manifests = {}
        self.inspections = {}
        self.releases = {}
        self.counters = {}
        self.today = ""

    # ------------------------------------------------------------------ helpers
    def _err(self, msg):
        return {"success": False, "error": msg}

    def _today(self):
        return _date(self.today) or datetime.date(2025, 1, 1)

    def _next_id(self, key, prefix):
        value = int(self.counters.get(key, 0)) + 1
        self.counters[key] = value
        return f"{prefix}{value}"

    def _container(self, container_id):
        if not isinstance(container_id, str) or container_id not in self.containers:
            return None, self._err(f"Container {container_id} not found")
        return self.containers[container_id], None

    def _manifest(self, manifest_id):
        if not isinstance(manifest_id, str) or manifest_id not in self.manifests:
            return None, self._err(f"Manifest {manifest_id} not found")
        return self.manifests[manifest_id], None

    def _demurrage(self, c, as_of):
        """Return (days_in_terminal, chargeable_days, amount) for a discharged container."""
        if not c["discharged_on"]:
            return 0, 0, 0.0
        days = (as_of - _date(c["discharged_on"])).days
        chargeable = max(days - c["free_days"], 0)
        amount = 0.0
        bands = self.demurrage_tariff.get(c["size"][:2], [])
        for day in range(1, chargeable + 1):
            for band in bands:
                if day >= band["from_day"] and (band["to_day"] is None or day <= band["to_day"]):
                    amount += band["rate"]
                    break
        return days, chargeable, _money(amount)

    def _total_due(self, m):
        return _money((m["duty"] or 0.0) + (m["vat"] or 0.0) + m["inspection_fees"] + m["penalties"])

    def _deferment_room(self, imp):
        return _money(imp["deferment_limit"] - imp["deferment_used"])

    # ------------------------------------------------------------------ queries
    def list_vessels(self) -> dict:
        """List vessels with voyage, berth, arrival and status, and the number of containers aboard or landed."""
        out = {}
        for vid, v in sorted(self.vessels.items()):
            n = sum(1 for c in self.containers.values() if c["vessel_id"] == vid)
            out[vid] = dict(copy.deepcopy(v), containers=n)
        return {"success": True, "data": out}

    def get_container(self, container_id: str) -> dict:
        """Get a container's vessel, size, seal, status, yard slot, free days, release and gate-out data.

        Args:
            container_id: ISO 6346 container number, e.g. "MSCU4831207".
        """
        c, err = self._container(container_id)
        if err:
            return err
        return {"success": True, "data": dict(copy.deepcopy(c), container_id=container_id)}

    def get_manifest(self, manifest_id: str) -> dict:
        """Get a cargo manifest with its lines, assessed duty and VAT, fees, penalties and total due.

        Args:
            manifest_id: manifest id, e.g. "MF-9001".
        """
        m, err = self._manifest(manifest_id)
        if err:
            return err
        return {"success": True, "data": dict(copy.deepcopy(m), manifest_id=manifest_id, total_due=self._total_due(m))}

    def lookup_hs_code(self, hs_code: str) -> dict:
        """Look up a 6-digit HS code in the tariff: description, duty %, VAT %, restriction and licence.

        Args:
            hs_code: 6-digit Harmonized System code, e.g. "610910".
        """
        if not isinstance(hs_code, str) or not re.fullmatch(r"\d{6}", hs_code):
            return self._err("hs_code must be 6 digits")
        t = self.tariff.get(hs_code)
        if t is None:
            return self._err(f"HS code {hs_code} is not in the tariff")
        return {"success": True, "data": dict(copy.deepcopy(t), hs_code=hs_code)}

    def calculate_demurrage(self, container_id: str, as_of_date: str) -> dict:
        """Compute demurrage for a discharged container up to a date.

        Args:
            container_id: container number.
            as_of_date: YYYY-MM-DD, not before the discharge date.
        Rules: days in terminal = as_of_date - discharged_on; days beyond the container's free days are
        charged per day at the rate of the tariff band (by container length, 20 or 40 ft) that day falls in.
        """
        c, err = self._container(container_id)
        if err:
            return err
        as_of = _date(as_of_date)
        if as_of is None:
            return self._err("as_of_date must be YYYY-MM-DD")
        if not c["discharged_on"]:
            return self._err(f"Container {container_id} has not been discharged")
        if as_of < _date(c["discharged_on"]):
            return self._err("as_of_date is before the discharge date")
        days, chargeable, amount = self._demurrage(c, as_of)
        return {"success": True, "data": {"days_in_terminal": days, "free_days": c["free_days"],
                                          "chargeable_days": chargeable, "amount": amount,
                                          "already_paid": c["demurrage_paid"]}}

    # ------------------------------------------------------------------ updates
    def discharge_container(self, container_id: str, yard_slot: str) -> dict:
        """Discharge a container from a berthed vessel into a yard slot; its free time starts today.

        Args:
            container_id: container still on the vessel.
            yard_slot: block-row-bay-tier slot such as "B04-12-3" that no other container occupies.
        """
        c, err = self._container(container_id)
        if err:
            return err
        if c["status"] != "on_vessel":
            return self._err(f"Container {container_id} is {c['status']}")
        v = self.vessels[c["vessel_id"]]
        if v["status"] != "berthed":
            return self._err(f"Vessel {v['name']} is {v['status']}; containers are discharged only at berth")
        if not isinstance(yard_slot, str) or not YARD_SLOT.match(yard_slot):
            return self._err("yard_slot must look like B04-12-3 (block+row, bay, tier 1-5)")
        for oid, o in self.containers.items():
            if o["yard_slot"] == yard_slot:
                return self._err(f"Yard slot {yard_slot} is occupied by {oid}")
        c["status"] = "discharged"
        c["yard_slot"] = yard_slot
        c["discharged_on"] = self._today().isoformat()
        return {"success": True, "message": f"{container_id} discharged to {yard_slot}"}

    def amend_manifest_line(self, manifest_id: str, line_no: str, hs_code: str, customs_value: float) -> dict:
        """Correct the HS code and customs value of a manifest line before assessment.

        Args:
            manifest_id: manifest in status filed.
            line_no: line key, e.g. "1".
            hs_code: 6-digit HS code present in the tariff.
            customs_value: customs (CIF) value in GBP, > 0.
        """
        m, err = self._manifest(manifest_id)
        if err:
            return err
        if m["status"] != "filed":
            return self._err(f"Manifest {manifest_id} is {m['status']}; only filed manifests can be amended")
        if not isinstance(line_no, str) or line_no not in m["lines"]:
            return self._err(f"Line {line_no} not on manifest {manifest_id}")
        if not isinstance(hs_code, str) or hs_code not in self.tariff:
            return self._err(f"HS code {hs_code} is not in the tariff")
        if not isinstance(customs_value, (int, float)) or isinstance(customs_value, bool) or customs_value <= 0:
            return self._err("customs_value must be positive")
        line = m["lines"][line_no]
        if line["hs_code"] == hs_code and line["customs_value"] == _money(customs_value):
            return self._err("The line already has these values")
        line["hs_code"] = hs_code
        line["customs_value"] = _money(customs_value)
        return {"success": True, "message": f"Line {line_no} of {manifest_id} amended"}

    def assess_duties(self, manifest_id: str) -> dict:
        """Assess import duty and VAT for a filed manifest.

        Args:
            manifest_id: manifest in status filed.
        Rules: the container must be discharged (or under inspection/held); every line's HS code must be
        in the tariff; restricted goods need the importer to hold the named licence. Duty = value x duty %;
        VAT = (value + duty) x VAT %, per line, rounded to pence.
        """
        m, err = self._manifest(manifest_id)
        if err:
            return err
        if m["status"] != "filed":
            return self._err(f"Manifest {manifest_id} is already {m['status']}")
        c = self.containers[m["container_id"]]
        if c["status"] in ("on_vessel",):
            return self._err("Container must be discharged before assessment")
        imp = self.importers[m["importer_id"]]
        duty = vat = 0.0
        for no, line in sorted(m["lines"].items()):
            t = self.tariff.get(line["hs_code"])
            if t is None:
                return self._err(f"Line {no}: HS code {line['hs_code']} is not in the tariff")
            if t["restricted"] and not imp["licences"].get(t["licence"], False):
                return self._err(f"Line {no}: {t['description']} requires a {t['licence']} licence")
            d = _money(line["customs_value"] * t["duty_pct"] / 100.0)
            duty += d
            vat += _money((line["customs_value"] + d) * t["vat_pct"] / 100.0)
        m["duty"] = _money(duty)
        m["vat"] = _money(vat)
        m["status"] = "assessed"
        m["assessed_on"] = self._today().isoformat()
        return {"success": True, "message": f"Manifest {manifest_id} assessed", "duty": m["duty"], "vat": m["vat"],
                "total_due": self._total_due(m)}

    def order_inspection(self, container_id: str, inspection_type: str) -> dict:
        """Order a customs inspection of a landed container; the fee is added to its manifest.

        Args:
            container_id: discharged or held container.
            inspection_type: documentary (free), xray (85.00) or physical (350.00).
        Rules: one open inspection per container; not after release.
        """
        c, err = self._container(container_id)
        if err:
            return err
        if not isinstance(inspection_type, str) or inspection_type not in INSPECTION_FEES:
            return self._err("inspection_type must be documentary, xray or physical")
        if c["status"] == "inspection":
            return self._err(f"Container {container_id} already has an open inspection")
        if c["status"] not in ("discharged", "held"):
            return self._err(f"Container {container_id} is {c['status']}; only landed, unreleased containers can be inspected")
        m = self.manifests[c["manifest_id"]]
        iid = self._next_id("inspection", "INS-")
        fee = INSPECTION_FEES[inspection_type]
        self.inspections[iid] = {"container_id": container_id, "type": inspection_type, "status": "scheduled",
                                 "ordered_on": self._today().isoformat(), "fee": fee, "result": None, "findings": None}
        c["status"] = "inspection"
        if fee:
            m["inspection_fees"] = _money(m["inspection_fees"] + fee)
        return {"success": True, "message": f"{inspection_type} inspection {iid} scheduled", "inspection_id": iid, "fee": fee}

    def record_inspection_result(self, inspection_id: str, result: str, findings: str) -> dict:
        """Record the outcome of a scheduled inspection.

        Args:
            inspection_id: scheduled inspection.
            result: "clear" or "discrepancy".
            findings: inspector's notes (required).
        Rules: clear returns the container to discharged; a discrepancy holds the container and adds a
        500.00 penalty to its manifest.
        """
        ins = self.inspections.get(inspection_id) if isinstance(inspection_id, str) else None
        if ins is None:
            return self._err(f"Inspection {inspection_id} not found")
        if ins["status"] != "scheduled":
            return self._err(f"Inspection {inspection_id} is already {ins['status']}")
        if result not in ("clear", "discrepancy"):
            return self._err("result must be clear or discrepancy")
        if not isinstance(findings, str) or len(findings.strip()) < 3:
            return self._err("findings are required")
        c = self.containers[ins["container_id"]]
        ins["status"] = "completed"
        ins["result"] = result
        ins["findings"] = findings.strip()
        if result == "clear":
            c["status"] = "discharged"
        else:
            c["status"] = "held"
            m = self.manifests[c["manifest_id"]]
            m["penalties"] = _money(m["penalties"] + DISCREPANCY_PENALTY)
        return {"success": True, "message": f"Inspection {inspection_id} recorded: {result}", "container_status": c["status"]}

    def pay_duties(self, manifest_id: str) -> dict:
        """Pay what is due on a manifest (duty, VAT, inspection fees, penalties) from the importer's deferment account.

        Args:
            manifest_id: assessed manifest, or a paid one with charges added after payment.
        Rules: importer must be active and the deferment account must have room for the amount.
        """
        m, err = self._manifest(manifest_id)
        if err:
            return err
        due = _money(self._total_due(m) - m["amount_paid"])
        if m["status"] == "paid" and due <= 0:
            return self._err(f"Manifest {manifest_id} is fully paid")
        if m["status"] not in ("assessed", "paid"):
            return self._err(f"Manifest {manifest_id} is {m['status']}; only assessed manifests can be paid")
        imp = self.importers[m["importer_id"]]
        if imp["status"] != "active":
            return self._err(f"Importer {m['importer_id']} is {imp['status']}")
        if due > self._deferment_room(imp):
            return self._err(f"Deferment account has {self._deferment_room(imp):.2f} available, {due:.2f} due")
        imp["deferment_used"] = _money(imp["deferment_used"] + due)
        m["status"] = "paid"
        m["paid_on"] = self._today().isoformat()
        m["amount_paid"] = _money(m["amount_paid"] + due)
        return {"success": True, "message": f"{due:.2f} debited from deferment account", "amount": due}

    def release_container(self, container_id: str) -> dict:
        """Issue the customs release for a container and settle demurrage to date.

        Args:
            container_id: discharged container.
        Rules: the container must be discharged (not held or under inspection); its manifest paid and
        with no unpaid penalties or fees added after payment; the importer active. Demurrage accrued up
        to today is debited from the deferment account (which must have room). A release number is
        generated.
        """
        c, err = self._container(container_id)
        if err:
            return err
        if c["status"] == "held":
            return self._err(f"Container {container_id} is held after an inspection discrepancy")
        if c["status"] == "inspection":
            return self._err(f"Container {container_id} has an open inspection")
        if c["status"] != "discharged":
            return self._err(f"Container {container_id} is {c['status']}")
        m = self.manifests[c["manifest_id"]]
        if m["status"] != "paid":
            return self._err(f"Manifest {c['manifest_id']} is {m['status']}; duties must be paid first")
        if self._total_due(m) > m["amount_paid"] + 0.005:
            return self._err(f"Manifest {c['manifest_id']} has {self._total_due(m) - m['amount_paid']:.2f} of new charges unpaid")
        imp = self.importers[m["importer_id"]]
        if imp["status"] != "active":
            return self._err(f"Importer {m['importer_id']} is {imp['status']}")
        _, chargeable, amount = self._demurrage(c, self._today())
        due = _money(max(amount - c["demurrage_paid"], 0.0))
        if due > self._deferment_room(imp):
            return self._err(f"Demurrage of {due:.2f} exceeds deferment room {self._deferment_room(imp):.2f}")
        rid = self._next_id("release", "REL-")
        number = "CR" + uuid.uuid4().hex[:10].upper()
        self.releases[rid] = {"container_id": container_id, "manifest_id": c["manifest_id"], "release_no": number,
                              "issued_on": self._today().isoformat(), "demurrage_charged": due}
        c["status"] = "released"
        c["release_id"] = rid
        if due > 0:
            c["demurrage_paid"] = _money(c["demurrage_paid"] + due)
            imp["deferment_used"] = _money(imp["deferment_used"] + due)
        m["status"] = "released"
        m["released_on"] = self._today().isoformat()
        return {"success": True, "message": f"Container {container_id} released", "release_id": rid,
                "release_no": number, "demurrage_charged": due, "chargeable_days": chargeable}

    def gate_out(self, container_id: str, truck_plate: str) -> dict:
        """Let a released container leave the terminal on a truck, freeing its yard slot.

        Args:
            container_id: released container.
            truck_plate: haulier's registration plate, e.g. "AB12 CDE".
        """
        c, err = self._container(container_id)
        if err:
            return err
        if c["status"] != "released":
            return self._err(f"Container {container_id} is {c['status']}; it needs a customs release")
        if not isinstance(truck_plate, str) or not TRUCK_PLATE.match(truck_plate.strip().upper()):
            return self._err("truck_plate is not a valid registration")
        c["status"] = "gated_out"
        c["gate_out_on"] = self._today().isoformat()
        c["truck_plate"] = truck_plate.strip().upper()
        c["yard_slot"] = None
        return {"success": True, "message": f"{container_id} left the terminal on {c['truck_plate']}"}
