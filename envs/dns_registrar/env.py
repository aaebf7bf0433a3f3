"""A domain registrar with hosted DNS: accounts with prepaid balances, contacts, domain registration,
renewal and inter-account transfers, transfer locks, nameservers and zone records.

Business dates are evaluated against the registrar's operating date (registry_date). Every charge
or refund is written to the ledger. Zone serials follow the YYYYMMDDnn convention and are bumped
on every record change.
"""

import datetime
import ipaddress
import re
import uuid


RECORD_TYPES = ("A", "AAAA", "CNAME", "MX", "TXT", "NS")
MIN_TTL, MAX_TTL = 60, 86400
TRANSFER_LOCK_DAYS = 60
MAX_TERM_YEARS = 10
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
_NAME_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)|\*")
_HOST = re.compile(r"(?=.{1,253}$)((?!-)[a-z0-9-]{1,63}(?<!-)\.)+[a-z]{2,63}")


class DnsRegistrar:
    """Accounts, contacts, TLD pricing, domains, DNS zones, transfers and a ledger."""

    def __init__(self, init_config: dict):
        self.registry_date = ""
        self.settings = {}
        self.accounts = {}
        self.contacts = {}
        self.tlds = {}
        self.domains = {}
        self.zones = {}
        self.transfers = {}
        self.ledger = {}
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

    def _today(self):
        return datetime.date.fromisoformat(self.registry_date)

    @staticmethod
    def _add_years(d, years):
        try:
            return d.replace(year=d.year + years)
        except ValueError:  # 29 February
            return d.replace(year=d.year + years, day=28)

    def _domain(self, domain):
        d = self.domains.get(domain.lower()) if isinstance(domain, str) else None
        if d is None:
            return None, self._fail(f"domain {domain} is not registered with this registrar")
        return d, None

    def _split(self, domain):
        """Returns (label, tld) or an error string."""
        if not isinstance(domain, str) or domain.count(".") != 1:
            return None, "domain must be a second-level name like example.com"
        label, tld = domain.lower().split(".")
        if not _LABEL.fullmatch(label):
            return None, (f"invalid label '{label}': 1-63 letters, digits or hyphens, "
                          "not starting or ending with a hyphen")
        if tld not in self.tlds:
            return None, f"TLD .{tld} is not offered"
        return (label, tld), None

    def _charge(self, account_id, amount, description, domain):
        """Debit (positive amount) or credit (negative amount) an account and write a ledger entry."""
        acc = self.accounts[account_id]
        acc["balance_usd"] = round(acc["balance_usd"] - amount, 2)
        self.counters["ledger"] += 1
        lid = f"LED-{self.counters['ledger']:05d}"
        self.ledger[lid] = {"account": account_id, "amount_usd": round(-amount, 2), "description": description,
                            "domain": domain, "date": self.registry_date}
        return lid

    def _bump_serial(self, zone):
        prefix = int(self.registry_date.replace("-", "")) * 100
        zone["serial"] = max(zone["serial"] + 1, prefix + 1)

    def _lock_age_ok(self, d):
        since = datetime.date.fromisoformat(d["last_transfer"] or d["created"])
        return (self._today() - since).days >= TRANSFER_LOCK_DAYS

    @staticmethod
    def _valid_host(value):
        return isinstance(value, str) and _HOST.fullmatch(value.lower().rstrip(".")) is not None

    # ------------------------------------------------------------------ queries

    def get_domain(self, domain: str) -> dict:
        """Return a domain's registration details (auth code withheld).

        Args:
            domain: Domain name, e.g. "brightpath.io".
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        data = {k: v for k, v in d.items() if k != "auth_code"}
        data["domain"] = domain.lower()
        return {"success": True, "data": data}

    def list_records(self, domain: str) -> dict:
        """List the DNS records and serial of a domain's hosted zone.

        Args:
            domain: Domain name.
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        z = self.zones.get(domain.lower()) if isinstance(domain, str) else None
        if z is None:
            return self._fail(f"no hosted zone for {domain}")
        rows = [dict(r, record_id=rid) for rid, r in sorted(z["records"].items(), key=lambda kv: int(kv[0][1:]))]
        return {"success": True, "data": {"domain": domain.lower(), "serial": z["serial"], "records": rows}}

    def check_availability(self, domain: str) -> dict:
        """Check whether a domain can be registered and at what yearly price.

        Args:
            domain: Candidate name, e.g. "northwind-labs.dev".
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        parts, err = self._split(domain)
        if err:
            return self._fail(err)
        tld = self.tlds[parts[1]]
        if domain.lower() in self.domains:
            return {"success": True, "data": {"domain": domain.lower(), "available": False,
                                              "reason": "already registered"}}
        if parts[0] in tld.get("reserved", []):
            return {"success": True, "data": {"domain": domain.lower(), "available": False,
                                              "reason": "reserved by the registry"}}
        return {"success": True, "data": {"domain": domain.lower(), "available": True,
                                          "register_usd_per_year": tld["register_usd"],
                                          "min_years": tld["min_years"], "max_years": tld["max_years"]}}

    def get_account(self, account_id: str) -> dict:
        """Return an account's balance, its domains and its ledger entries.

        Args:
            account_id: Account id, e.g. "ACC-100".
        """
        err = self._require_str(account_id=account_id)
        if err:
            return err
        acc = self.accounts.get(account_id)
        if acc is None:
            return self._fail(f"account {account_id} not found")
        domains = sorted(n for n, d in self.domains.items() if d["account"] == account_id)
        entries = [dict(e, entry_id=k) for k, e in sorted(self.ledger.items()) if e["account"] == account_id]
        data = dict(acc)
        data["account_id"] = account_id
        data["domains"] = domains
        data["ledger"] = entries
        return {"success": True, "data": data}

    def list_tld_pricing(self) -> dict:
        """List offered TLDs with register, renew, transfer and redemption prices and term limits."""
        rows = [{"tld": t, "register_usd": v["register_usd"], "renew_usd": v["renew_usd"],
                 "transfer_usd": v["transfer_usd"], "redemption_usd": v["redemption_usd"],
                 "min_years": v["min_years"], "max_years": v["max_years"], "grace_days": v["grace_days"]}
                for t, v in sorted(self.tlds.items())]
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates

    def register_domain(self, account_id: str, domain: str, years: int, registrant_contact_id: str) -> dict:
        """Register an available domain for an account, paying from its balance.

        Args:
            account_id: Active account paying for the registration.
            domain: Name to register, e.g. "northwind-labs.dev".
            years: Term in years within the TLD's min/max.
            registrant_contact_id: A verified contact of the same account; also used as admin and
                tech contact.
        Effects: domain created active, transfer-locked, with the registrar's default nameservers
        and an empty hosted zone; the price (register_usd x years) is charged and logged.
        """
        err = self._require_str(
            account_id=account_id, domain=domain, registrant_contact_id=registrant_contact_id)
        if err:
            return err
        acc = self.accounts.get(account_id)
        if acc is None:
            return self._fail(f"account {account_id} not found")
        if acc["status"] != "active":
            return self._fail(f"account {account_id} is {acc['status']}")
        parts, err = self._split(domain)
        if err:
            return self._fail(err)
        name = domain.lower()
        tld = self.tlds[parts[1]]
        if name in self.domains or parts[0] in tld.get("reserved", []):
            return self._fail(f"{name} is not available")
        if not isinstance(years, int) or isinstance(years, bool) or not (tld["min_years"] <= years <= tld["max_years"]):
            return self._fail(f".{parts[1]} registrations must be {tld['min_years']}-{tld['max_years']} years")
        c = self.contacts.get(registrant_contact_id)
        if c is None or c["account"] != account_id:
            return self._fail(f"contact {registrant_contact_id} does not belong to account {account_id}")
        if not c["verified"]:
            return self._fail(f"contact {registrant_contact_id} has not verified their email address")
        price = round(tld["register_usd"] * years, 2)
        if acc["balance_usd"] < price:
            return self._fail(f"insufficient balance: {price:.2f} USD needed, {acc['balance_usd']:.2f} available")
        today = self._today()
        self.domains[name] = {
            "account": account_id, "registrant": registrant_contact_id, "admin_contact": registrant_contact_id,
            "tech_contact": registrant_contact_id, "status": "active", "created": today.isoformat(),
            "expires": self._add_years(today, years).isoformat(), "auto_renew": True, "transfer_lock": True,
            "auth_code": uuid.uuid4().hex[:16], "nameservers": list(self.settings["default_nameservers"]),
            "privacy": tld["allows_privacy"], "last_transfer": None,
        }
        self.zones[name] = {"serial": int(today.strftime("%Y%m%d")) * 100 + 1, "dnssec": False, "records": {}}
        lid = self._charge(account_id, price, f"Registration {years}y", name)
        return {"success": True, "message": f"Registered {name} until {self.domains[name]['expires']}",
                "charged_usd": price, "ledger_entry": lid}

    def renew_domain(self, domain: str, years: int) -> dict:
        """Extend a domain's registration, paying from the owning account.

        Args:
            domain: Domain name.
            years: Years to add, 1-10.
        Rules: the new expiry may be at most 10 years after the registry date; an expired domain
        becomes active again; past the TLD's grace period the redemption fee is added. Domains
        in a pending transfer cannot be renewed.
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        name = domain.lower()
        if d["status"] == "pending_transfer":
            return self._fail(f"{name} has a pending transfer")
        if not isinstance(years, int) or isinstance(years, bool) or not (1 <= years <= MAX_TERM_YEARS):
            return self._fail(f"years must be an integer from 1 to {MAX_TERM_YEARS}")
        tld = self.tlds[name.split(".")[1]]
        today = self._today()
        expires = datetime.date.fromisoformat(d["expires"])
        new_exp = self._add_years(expires, years)
        if new_exp > self._add_years(today, MAX_TERM_YEARS):
            return self._fail(f"renewal would extend {name} to {new_exp.isoformat()}, "
                              f"more than {MAX_TERM_YEARS} years ahead")
        price = tld["renew_usd"] * years
        redemption = expires < today and (today - expires).days > tld["grace_days"]
        if redemption:
            price += tld["redemption_usd"]
        price = round(price, 2)
        acc = self.accounts[d["account"]]
        if acc["balance_usd"] < price:
            return self._fail(f"insufficient balance: {price:.2f} USD needed, {acc['balance_usd']:.2f} available")
        d["expires"] = new_exp.isoformat()
        if d["status"] == "expired":
            d["status"] = "active"
        desc = f"Renewal {years}y" + (" incl. redemption fee" if redemption else "")
        lid = self._charge(d["account"], price, desc, name)
        return {"success": True, "message": f"{name} renewed until {d['expires']}", "charged_usd": price,
                "ledger_entry": lid}

    def add_record(self, domain: str, name: str, record_type: str, value: str, ttl: int = 3600,
                   priority: int = 0) -> dict:
        """Add a DNS record to a domain's hosted zone.

        Args:
            domain: Domain name (must be active).
            name: Record owner relative to the zone: "@" for the apex, or labels like "www",
                "_dmarc" or "*" (wildcard).
            record_type: A, AAAA, CNAME, MX, TXT or NS.
            value: IPv4 (A), IPv6 (AAAA), hostname (CNAME, MX, NS) or text up to 255 characters (TXT).
            ttl: Time to live in seconds, 60-86400 (default 3600).
            priority: MX preference 0-65535 (MX only; must be 0 for other types).
        Rules: CNAME records cannot be at the apex and cannot share a name with any other record;
        identical records are rejected. The zone serial is bumped.
        """
        err = self._require_str(domain=domain, name=name, record_type=record_type, value=value)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        dom = domain.lower()
        if d["status"] != "active":
            return self._fail(f"{dom} is {d['status']}; DNS changes are disabled")
        zone = self.zones[dom]
        labels_ok = name == "@" or all(_NAME_LABEL.fullmatch(p) for p in name.lower().split("."))
        if not labels_ok:
            return self._fail(f"invalid record name '{name}'")
        name = name.lower()
        if record_type not in RECORD_TYPES:
            return self._fail(f"unsupported record type '{record_type}'; expected one of {', '.join(RECORD_TYPES)}")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not (MIN_TTL <= ttl <= MAX_TTL):
            return self._fail(f"ttl must be an integer from {MIN_TTL} to {MAX_TTL}")
        if not isinstance(priority, int) or isinstance(priority, bool):
            return self._fail("priority must be an integer")
        if record_type == "MX":
            if not (0 <= priority <= 65535):
                return self._fail("MX priority must be 0-65535")
        elif priority != 0:
            return self._fail("priority is only used by MX records")
        if not isinstance(value, str) or not value:
            return self._fail("value must be a non-empty string")
        if record_type == "A":
            try:
                ipaddress.IPv4Address(value)
            except ValueError:
                return self._fail(f"'{value}' is not a valid IPv4 address")
        elif record_type == "AAAA":
            try:
                value = str(ipaddress.IPv6Address(value))
            except ValueError:
                return self._fail(f"'{value}' is not a valid IPv6 address")
        elif record_type in ("CNAME", "MX", "NS"):
            if not self._valid_host(value):
                return self._fail(f"'{value}' is not a valid hostname")
            value = value.lower().rstrip(".")
        elif record_type == "TXT" and len(value) > 255:
            return self._fail("TXT values are limited to 255 characters")
        same_name = [r for r in zone["records"].values() if r["name"] == name]
        if record_type == "CNAME":
            if name == "@":
                return self._fail("a CNAME record cannot be placed at the zone apex")
            if same_name:
                return self._fail(f"'{name}' already has records; a CNAME must be the only record for a name")
        elif any(r["type"] == "CNAME" for r in same_name):
            return self._fail(f"'{name}' has a CNAME record; no other records may share its name")
        if any(r["type"] == record_type and r["value"] == value for r in same_name):
            return self._fail(f"an identical {record_type} record for '{name}' already exists")
        self.counters["record"] += 1
        rid = f"r{self.counters['record']}"
        rec = {"name": name, "type": record_type, "value": value, "ttl": ttl}
        if record_type == "MX":
            rec["priority"] = priority
        zone["records"][rid] = rec
        self._bump_serial(zone)
        return {"success": True, "message": f"Added {record_type} record {rid} for {name}", "record_id": rid,
                "serial": zone["serial"]}

    def delete_record(self, domain: str, record_id: str) -> dict:
        """Delete a DNS record from a domain's hosted zone and bump the serial.

        Args:
            domain: Domain name (must be active).
            record_id: Record id from list_records, e.g. "r12".
        """
        err = self._require_str(domain=domain, record_id=record_id)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        dom = domain.lower()
        if d["status"] != "active":
            return self._fail(f"{dom} is {d['status']}; DNS changes are disabled")
        zone = self.zones[dom]
        if record_id not in zone["records"]:
            return self._fail(f"record {record_id} not found in {dom}")
        rec = zone["records"].pop(record_id)
        self._bump_serial(zone)
        return {"success": True, "message": f"Deleted {rec['type']} record {record_id} ({rec['name']})",
                "serial": zone["serial"]}

    def update_nameservers(self, domain: str, nameservers: list) -> dict:
        """Replace a domain's delegated nameservers.

        Args:
            domain: Domain name (must be active).
            nameservers: 2-13 distinct valid hostnames, e.g. ["ns1.example.net", "ns2.example.net"].
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        if d["status"] != "active":
            return self._fail(f"{domain.lower()} is {d['status']}; nameserver changes are disabled")
        if not isinstance(nameservers, list) or not all(isinstance(n, str) for n in nameservers):
            return self._fail("nameservers must be a list of hostnames")
        ns = [n.lower().rstrip(".") for n in nameservers]
        if not (2 <= len(ns) <= 13):
            return self._fail("between 2 and 13 nameservers are required")
        if len(set(ns)) != len(ns):
            return self._fail("nameservers must be distinct")
        bad = [n for n in ns if not self._valid_host(n)]
        if bad:
            return self._fail(f"invalid nameserver hostname '{bad[0]}'")
        if ns == d["nameservers"]:
            return self._fail("these nameservers are already set")
        d["nameservers"] = ns
        return {"success": True, "message": f"Nameservers of {domain.lower()} updated", "nameservers": ns}

    def set_transfer_lock(self, domain: str, locked: bool) -> dict:
        """Turn a domain's registrar transfer lock on or off.

        Args:
            domain: Domain name.
            locked: True to lock, False to unlock.
        Rules: a domain cannot be unlocked within 60 days of its registration or last transfer.
        """
        err = self._require_str(domain=domain)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        if not isinstance(locked, bool):
            return self._fail("locked must be a boolean")
        if d["transfer_lock"] == locked:
            return self._fail(f"{domain.lower()} is already {'locked' if locked else 'unlocked'}")
        if not locked and not self._lock_age_ok(d):
            return self._fail(f"{domain.lower()} must stay locked for {TRANSFER_LOCK_DAYS} days "
                              "after registration or transfer")
        d["transfer_lock"] = locked
        return {"success": True, "message": f"{domain.lower()} transfer lock {'enabled' if locked else 'disabled'}"}

    def request_transfer(self, domain: str, to_account_id: str, auth_code: str) -> dict:
        """Request moving a domain to another account; the transfer fee is charged up front.

        Args:
            domain: Domain name (active, unlocked, outside the 60-day lock window).
            to_account_id: Gaining account (active, different from the current owner).
            auth_code: The domain's authorization code.
        Effects: the domain becomes pending_transfer; a transfer TRF-NNN is opened and the
        TLD's transfer price is charged to the gaining account.
        """
        err = self._require_str(domain=domain, to_account_id=to_account_id, auth_code=auth_code)
        if err:
            return err
        d, err = self._domain(domain)
        if err:
            return err
        dom = domain.lower()
        if d["status"] != "active":
            return self._fail(f"{dom} is {d['status']} and cannot be transferred")
        if d["transfer_lock"]:
            return self._fail(f"{dom} is transfer-locked")
        if not self._lock_age_ok(d):
            return self._fail(f"{dom} was registered or transferred less than {TRANSFER_LOCK_DAYS} days ago")
        acc = self.accounts.get(to_account_id)
        if acc is None:
            return self._fail(f"account {to_account_id} not found")
        if acc["status"] != "active":
            return self._fail(f"account {to_account_id} is {acc['status']}")
        if to_account_id == d["account"]:
            return self._fail(f"{dom} already belongs to {to_account_id}")
        if not isinstance(auth_code, str) or auth_code != d["auth_code"]:
            return self._fail("authorization code does not match")
        fee = self.tlds[dom.split(".")[1]]["transfer_usd"]
        if acc["balance_usd"] < fee:
            return self._fail(f"insufficient balance: {fee:.2f} USD needed, {acc['balance_usd']:.2f} available")
        self.counters["transfer"] += 1
        tid = f"TRF-{self.counters['transfer']:03d}"
        self.transfers[tid] = {"domain": dom, "from_account": d["account"], "to_account": to_account_id,
                               "status": "pending", "requested_on": self.registry_date, "completed_on": None,
                               "fee_usd": fee, "reason": None}
        d["status"] = "pending_transfer"
        lid = self._charge(to_account_id, fee, "Transfer in", dom)
        return {"success": True, "message": f"Transfer {tid} of {dom} requested", "transfer_id": tid,
                "charged_usd": fee, "ledger_entry": lid}

    def approve_transfer(self, transfer_id: str) -> dict:
        """Approve a pending transfer (the losing owner's consent) and complete it.

        Args:
            transfer_id: Transfer id, e.g. "TRF-007".
        Effects: the domain moves to the gaining account with that account's default contact as
        registrant, admin and tech contact; its expiry is extended by one year (included in the
        transfer fee); a new auth code is issued; it is transfer-locked for 60 days and active
        again; the transfer is completed.
        """
        err = self._require_str(transfer_id=transfer_id)
        if err:
            return err
        t = self.transfers.get(transfer_id)
        if t is None:
            return self._fail(f"transfer {transfer_id} not found")
        if t["status"] != "pending":
            return self._fail(f"transfer {transfer_id} is {t['status']}")
        d = self.domains[t["domain"]]
        gaining = self.accounts[t["to_account"]]
        contact = gaining["default_contact"]
        if contact is None or contact not in self.contacts:
            return self._fail(f"account {t['to_account']} has no default contact to take over the domain")
        d["account"] = t["to_account"]
        d["registrant"] = contact
        d["admin_contact"] = contact
        d["tech_contact"] = contact
        d["status"] = "active"
        d["expires"] = self._add_years(datetime.date.fromisoformat(d["expires"]), 1).isoformat()
        d["auth_code"] = uuid.uuid4().hex[:16]
        d["transfer_lock"] = True
        d["last_transfer"] = self.registry_date
        t["status"] = "completed"
        t["completed_on"] = self.registry_date
        return {"success": True, "message": f"{t['domain']} transferred to {t['to_account']}",
                "expires": d["expires"]}

    def reject_transfer(self, transfer_id: str, reason: str) -> dict:
        """Reject a pending transfer; the gaining account is refunded.

        Args:
            transfer_id: Transfer id.
            reason: Why the transfer is rejected (at least 5 characters).
        """
        err = self._require_str(transfer_id=transfer_id, reason=reason)
        if err:
            return err
        t = self.transfers.get(transfer_id)
        if t is None:
            return self._fail(f"transfer {transfer_id} not found")
        if t["status"] != "pending":
            return self._fail(f"transfer {transfer_id} is {t['status']}")
        if not isinstance(reason, str) or len(reason.strip()) < 5:
            return self._fail("a rejection reason of at least 5 characters is required")
        self.domains[t["domain"]]["status"] = "active"
        t["status"] = "rejected"
        t["completed_on"] = self.registry_date
        t["reason"] = reason.strip()
        lid = self._charge(t["to_account"], -t["fee_usd"], "Transfer refund", t["domain"])
        return {"success": True, "message": f"Transfer {transfer_id} rejected and {t['fee_usd']:.2f} USD refunded",
                "ledger_entry": lid}
