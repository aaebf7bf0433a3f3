"""Inpatient electronic health record: patients, admissions, diagnoses, allergies,
medication orders with allergy and interaction screening, bed management and discharge."""

import datetime
import re

ICD10_PATTERN = re.compile(r"^[A-TV-Z][0-9][0-9A-Z](\.[0-9A-Z]{1,4})?$")
SEXES = ("F", "M", "X", "U")
ALLERGY_SEVERITIES = ("mild", "moderate", "severe")
DISPOSITIONS = (
    "home",
    "home_with_services",
    "skilled_nursing",
    "rehabilitation",
    "transferred",
    "against_medical_advice",
    "deceased",
)


class HealthRecords:
    def __init__(self, init_config: dict):
        self.current_date = ""
        self.patients = {}
        self.practitioners = {}
        self.beds = {}
        self.encounters = {}
        self.diagnoses = {}
        self.allergies = {}
        self.medications = {}
        self.interactions = {}
        self.orders = {}
        self.counters = {}

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _err(message: str) -> dict:
        return {"success": False, "error": message}

    def _next_id(self, kind: str, prefix: str) -> str:
        value = self.counters.get(kind, 1000) + 1
        self.counters[kind] = value
        return f"{prefix}{value}"

    @staticmethod
    def _valid_date(text) -> bool:
        if not isinstance(text, str):
            return False
        try:
            datetime.date.fromisoformat(text)
        except ValueError:
            return False
        return True

    def _open_encounter(self, encounter_id):
        if not isinstance(encounter_id, str) or encounter_id not in self.encounters:
            return None, self._err(f"Encounter {encounter_id} not found")
        enc = self.encounters[encounter_id]
        if enc["status"] != "admitted":
            return None, self._err(f"Encounter {encounter_id} is {enc['status']}, not admitted")
        return enc, None

    def _safety_findings(self, encounter: dict, medication_id: str) -> dict:
        """Allergy, interaction and duplicate-therapy findings for a proposed medication."""
        med = self.medications[medication_id]
        names = {med["name"].lower(), med["drug_class"].lower()}
        allergy_hits = []
        for allergy in self.allergies.values():
            if (
                allergy["patient_id"] == encounter["patient_id"]
                and allergy["status"] == "active"
                and allergy["substance"].lower() in names
            ):
                allergy_hits.append(
                    {
                        "allergy_id": allergy["allergy_id"],
                        "substance": allergy["substance"],
                        "severity": allergy["severity"],
                        "reaction": allergy["reaction"],
                    }
                )
        interaction_hits = []
        duplicates = []
        for order in self.orders.values():
            if order["encounter_id"] != encounter["encounter_id"] or order["status"] != "active":
                continue
            other = self.medications.get(order["medication_id"], {})
            if order["medication_id"] == medication_id:
                duplicates.append(order["order_id"])
                continue
            if other.get("drug_class") == med["drug_class"]:
                duplicates.append(order["order_id"])
            pair = {med["drug_class"], other.get("drug_class")}
            for rule in self.interactions.values():
                if {rule["class_a"], rule["class_b"]} == pair and len(pair) == 2:
                    interaction_hits.append(
                        {
                            "interaction_id": rule["interaction_id"],
                            "with_order": order["order_id"],
                            "with_medication": other.get("name"),
                            "severity": rule["severity"],
                            "effect": rule["effect"],
                        }
                    )
        return {"allergies": allergy_hits, "interactions": interaction_hits, "duplicate_orders": duplicates}

    # ------------------------------------------------------------------ queries
    def get_patient(self, patient_id: str) -> dict:
        """Return a patient's demographics, active allergies and current encounter.

        Args:
            patient_id: Patient id, e.g. P1003.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        data = dict(self.patients[patient_id])
        data["allergies"] = [
            {"allergy_id": a["allergy_id"], "substance": a["substance"], "reaction": a["reaction"], "severity": a["severity"]}
            for a in self.allergies.values()
            if a["patient_id"] == patient_id and a["status"] == "active"
        ]
        return {"success": True, "data": data}

    def list_current_inpatients(self) -> dict:
        """List every admitted encounter with patient name, bed and attending physician."""
        rows = []
        for enc in self.encounters.values():
            if enc["status"] != "admitted":
                continue
            rows.append(
                {
                    "encounter_id": enc["encounter_id"],
                    "patient_id": enc["patient_id"],
                    "patient_name": self.patients.get(enc["patient_id"], {}).get("name"),
                    "bed_id": enc["bed_id"],
                    "attending_id": enc["attending_id"],
                    "admit_date": enc["admit_date"],
                }
            )
        rows.sort(key=lambda r: r["encounter_id"])
        return {"success": True, "data": rows}

    def get_encounter(self, encounter_id: str) -> dict:
        """Return an encounter with its diagnoses and medication orders.

        Args:
            encounter_id: Encounter id, e.g. E5004.
        """
        if not isinstance(encounter_id, str) or encounter_id not in self.encounters:
            return self._err(f"Encounter {encounter_id} not found")
        data = dict(self.encounters[encounter_id])
        data["diagnoses"] = [dict(d) for d in self.diagnoses.values() if d["encounter_id"] == encounter_id]
        data["orders"] = [dict(o) for o in self.orders.values() if o["encounter_id"] == encounter_id]
        return {"success": True, "data": data}

    def check_medication_safety(self, encounter_id: str, medication_id: str) -> dict:
        """Screen a medication against the patient's active allergies and the encounter's active
        orders without placing an order. Reports allergy matches (by drug name or drug class),
        class-level interactions with their severity, and duplicate therapy.

        Args:
            encounter_id: Admitted encounter id.
            medication_id: Formulary medication id, e.g. MED-WARF5.
        """
        enc, error = self._open_encounter(encounter_id)
        if error:
            return error
        if not isinstance(medication_id, str) or medication_id not in self.medications:
            return self._err(f"Medication {medication_id} is not on the formulary")
        findings = self._safety_findings(enc, medication_id)
        blocking = any(a["severity"] == "severe" for a in findings["allergies"]) or any(
            i["severity"] == "contraindicated" for i in findings["interactions"]
        )
        needs_override = bool(findings["allergies"]) or any(i["severity"] == "major" for i in findings["interactions"])
        findings["verdict"] = "blocked" if blocking else ("override_required" if needs_override else "clear")
        return {"success": True, "data": findings}

    # ------------------------------------------------------------------ updates
    def register_patient(self, name: str, date_of_birth: str, sex: str, phone: str = "") -> dict:
        """Register a new patient and assign a patient id and medical record number.

        Rules: name must be non-empty, date of birth an ISO date not in the future, sex one of
        F, M, X, U; a patient with the same name and date of birth may not be registered twice.

        Args:
            name: Full name, e.g. "Maria Lopez".
            date_of_birth: ISO date, e.g. 1984-03-22.
            sex: One of F, M, X (non-binary), U (unknown).
            phone: Contact phone number (optional).
        """
        if not isinstance(name, str) or not name.strip():
            return self._err("Patient name is required")
        if not self._valid_date(date_of_birth):
            return self._err(f"Invalid date of birth {date_of_birth!r}; use YYYY-MM-DD")
        if date_of_birth > self.current_date:
            return self._err("Date of birth cannot be in the future")
        if sex not in SEXES:
            return self._err(f"Sex must be one of {', '.join(SEXES)}")
        if not isinstance(phone, str):
            return self._err("Phone must be a string")
        for p in self.patients.values():
            if p["name"].lower() == name.strip().lower() and p["date_of_birth"] == date_of_birth:
                return self._err(f"Possible duplicate: patient {p['patient_id']} has the same name and date of birth")
        patient_id = self._next_id("patient", "P")
        self.patients[patient_id] = {
            "patient_id": patient_id,
            "mrn": f"MRN-{int(patient_id[1:]) * 7 + 300000}",
            "name": name.strip(),
            "date_of_birth": date_of_birth,
            "sex": sex,
            "phone": phone,
            "status": "active",
            "current_encounter_id": None,
            "last_discharge_date": None,
        }
        return {"success": True, "message": f"Registered {name.strip()} as {patient_id}", "patient_id": patient_id}

    def record_allergy(self, patient_id: str, substance: str, reaction: str, severity: str) -> dict:
        """Record an allergy or intolerance for a patient. The substance may be a drug name
        (e.g. "Warfarin") or a drug class (e.g. "penicillins"). Returns the ids of active orders
        in the current encounter that now conflict with the new allergy.

        Rules: severity is mild, moderate or severe; an active allergy to the same substance
        cannot be recorded twice.

        Args:
            patient_id: Patient id.
            substance: Drug name or drug class.
            reaction: Observed reaction, e.g. "hives", "anaphylaxis".
            severity: mild, moderate or severe.
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        if not isinstance(substance, str) or not substance.strip():
            return self._err("Substance is required")
        if not isinstance(reaction, str) or not reaction.strip():
            return self._err("Reaction is required")
        if severity not in ALLERGY_SEVERITIES:
            return self._err("Severity must be mild, moderate or severe")
        key = substance.strip().lower()
        for a in self.allergies.values():
            if a["patient_id"] == patient_id and a["status"] == "active" and a["substance"].lower() == key:
                return self._err(f"Patient already has an active allergy to {a['substance']} ({a['allergy_id']})")
        allergy_id = self._next_id("allergy", "AL")
        self.allergies[allergy_id] = {
            "allergy_id": allergy_id,
            "patient_id": patient_id,
            "substance": substance.strip(),
            "reaction": reaction.strip(),
            "severity": severity,
            "recorded_on": self.current_date,
            "status": "active",
        }
        conflicts = []
        enc_id = self.patients[patient_id]["current_encounter_id"]
        for o in self.orders.values():
            if o["encounter_id"] == enc_id and o["status"] == "active":
                med = self.medications.get(o["medication_id"], {})
                if key in (med.get("name", "").lower(), med.get("drug_class", "").lower()):
                    conflicts.append(o["order_id"])
        return {
            "success": True,
            "message": f"Recorded {severity} allergy to {substance.strip()} for {patient_id}",
            "allergy_id": allergy_id,
            "conflicting_orders": sorted(conflicts),
        }

    def admit_patient(self, patient_id: str, attending_id: str, bed_id: str, admit_reason: str) -> dict:
        """Admit a patient as an inpatient: opens an encounter and assigns a bed.

        Rules: the patient must be active and not already admitted; the attending must be an
        active practitioner with role attending; the bed must be available.

        Args:
            patient_id: Patient id.
            attending_id: Practitioner id of the attending physician, e.g. PR201.
            bed_id: Bed id, e.g. 4N-07.
            admit_reason: Reason for admission (chief complaint).
        """
        if not isinstance(patient_id, str) or patient_id not in self.patients:
            return self._err(f"Patient {patient_id} not found")
        patient = self.patients[patient_id]
        if patient["status"] != "active":
            return self._err(f"Patient {patient_id} is {patient['status']} and cannot be admitted")
        if patient["current_encounter_id"]:
            return self._err(f"Patient {patient_id} is already admitted under {patient['current_encounter_id']}")
        doc = self.practitioners.get(attending_id) if isinstance(attending_id, str) else None
        if doc is None:
            return self._err(f"Practitioner {attending_id} not found")
        if not doc["active"] or doc["role"] != "attending":
            return self._err(f"Practitioner {attending_id} cannot be attending of record")
        bed = self.beds.get(bed_id) if isinstance(bed_id, str) else None
        if bed is None:
            return self._err(f"Bed {bed_id} not found")
        if bed["status"] != "available":
            return self._err(f"Bed {bed_id} is {bed['status']}")
        if not isinstance(admit_reason, str) or not admit_reason.strip():
            return self._err("Admit reason is required")
        encounter_id = self._next_id("encounter", "E")
        self.encounters[encounter_id] = {
            "encounter_id": encounter_id,
            "patient_id": patient_id,
            "status": "admitted",
            "attending_id": attending_id,
            "bed_id": bed_id,
            "admit_date": self.current_date,
            "admit_reason": admit_reason.strip(),
            "discharge_date": None,
            "disposition": None,
            "discharge_summary": None,
        }
        bed["status"] = "occupied"
        bed["patient_id"] = patient_id
        bed["encounter_id"] = encounter_id
        patient["current_encounter_id"] = encounter_id
        return {"success": True, "message": f"Admitted {patient_id} to bed {bed_id}", "encounter_id": encounter_id}

    def add_diagnosis(self, encounter_id: str, icd10: str, description: str, rank: str = "secondary") -> dict:
        """Add a coded diagnosis to an admitted encounter.

        Rules: the code must be ICD-10 shaped (e.g. J18.9); the same code cannot be active twice
        on one encounter; adding a primary diagnosis demotes the current primary to secondary.

        Args:
            encounter_id: Admitted encounter id.
            icd10: ICD-10-CM code, e.g. I50.23.
            description: Clinical description of the diagnosis.
            rank: primary or secondary (default secondary).
        """
        enc, error = self._open_encounter(encounter_id)
        if error:
            return error
        if not isinstance(icd10, str) or not ICD10_PATTERN.match(icd10.strip().upper()):
            return self._err(f"Invalid ICD-10 code {icd10!r}")
        if not isinstance(description, str) or not description.strip():
            return self._err("Description is required")
        if rank not in ("primary", "secondary"):
            return self._err("Rank must be primary or secondary")
        code = icd10.strip().upper()
        demoted = None
        for d in self.diagnoses.values():
            if d["encounter_id"] != encounter_id:
                continue
            if d["icd10"] == code and d["status"] == "active":
                return self._err(f"Diagnosis {code} is already active on {encounter_id} ({d['diagnosis_id']})")
        if rank == "primary":
            for d in self.diagnoses.values():
                if d["encounter_id"] == encounter_id and d["rank"] == "primary":
                    d["rank"] = "secondary"
                    demoted = d["diagnosis_id"]
        diagnosis_id = self._next_id("diagnosis", "DX")
        self.diagnoses[diagnosis_id] = {
            "diagnosis_id": diagnosis_id,
            "encounter_id": encounter_id,
            "icd10": code,
            "description": description.strip(),
            "rank": rank,
            "status": "active",
            "recorded_on": self.current_date,
            "resolved_on": None,
        }
        result = {"success": True, "message": f"Added {rank} diagnosis {code} to {encounter_id}", "diagnosis_id": diagnosis_id}
        if demoted:
            result["demoted"] = demoted
        return result

    def resolve_diagnosis(self, diagnosis_id: str) -> dict:
        """Mark an active diagnosis as resolved as of today.

        Args:
            diagnosis_id: Diagnosis id, e.g. DX7004.
        """
        if not isinstance(diagnosis_id, str) or diagnosis_id not in self.diagnoses:
            return self._err(f"Diagnosis {diagnosis_id} not found")
        d = self.diagnoses[diagnosis_id]
        if d["status"] != "active":
            return self._err(f"Diagnosis {diagnosis_id} is already {d['status']}")
        d["status"] = "resolved"
        d["resolved_on"] = self.current_date
        return {"success": True, "message": f"Diagnosis {diagnosis_id} ({d['icd10']}) resolved"}

    def place_medication_order(
        self,
        encounter_id: str,
        medication_id: str,
        dose_mg: float,
        frequency_per_day: int,
        route: str,
        prescriber_id: str,
        override_reason: str = "",
    ) -> dict:
        """Order a formulary medication for an admitted patient after safety screening.

        Rules: the prescriber must be active and allowed to prescribe; the route must be one the
        medication supports; dose x frequency may not exceed the maximum daily dose; frequency is
        1-6 per day. A severe allergy or a contraindicated interaction always blocks the order;
        a mild/moderate allergy or a major interaction needs an override_reason; the same
        medication or another drug of the same class cannot already be active. Moderate
        interactions are returned as warnings.

        Args:
            encounter_id: Admitted encounter id.
            medication_id: Formulary medication id.
            dose_mg: Dose per administration in milligrams (> 0).
            frequency_per_day: Administrations per day, 1-6.
            route: Administration route, e.g. oral, iv, subcutaneous.
            prescriber_id: Practitioner id of the prescriber.
            override_reason: Clinical justification when screening requires an override.
        """
        enc, error = self._open_encounter(encounter_id)
        if error:
            return error
        if not isinstance(medication_id, str) or medication_id not in self.medications:
            return self._err(f"Medication {medication_id} is not on the formulary")
        med = self.medications[medication_id]
        prescriber = self.practitioners.get(prescriber_id) if isinstance(prescriber_id, str) else None
        if prescriber is None:
            return self._err(f"Practitioner {prescriber_id} not found")
        if not prescriber["active"] or not prescriber["can_prescribe"]:
            return self._err(f"Practitioner {prescriber_id} is not authorised to prescribe")
        if isinstance(dose_mg, bool) or not isinstance(dose_mg, (int, float)) or dose_mg <= 0:
            return self._err("dose_mg must be a positive number")
        if isinstance(frequency_per_day, bool) or not isinstance(frequency_per_day, int) or not 1 <= frequency_per_day <= 6:
            return self._err("frequency_per_day must be an integer from 1 to 6")
        if route not in med["routes"]:
            return self._err(f"{med['name']} cannot be given by route {route!r}; allowed: {', '.join(med['routes'])}")
        daily = dose_mg * frequency_per_day
        if daily > med["max_daily_mg"]:
            return self._err(f"Daily dose {daily:g} mg exceeds the maximum of {med['max_daily_mg']:g} mg for {med['name']}")
        if not isinstance(override_reason, str):
            return self._err("override_reason must be a string")
        findings = self._safety_findings(enc, medication_id)
        if findings["duplicate_orders"]:
            return self._err(
                f"Duplicate therapy: active order(s) {', '.join(sorted(findings['duplicate_orders']))} in class {med['drug_class']}"
            )
        for a in findings["allergies"]:
            if a["severity"] == "severe":
                return self._err(f"Blocked: severe allergy to {a['substance']} ({a['reaction']})")
        for i in findings["interactions"]:
            if i["severity"] == "contraindicated":
                return self._err(f"Blocked: contraindicated with {i['with_medication']} ({i['with_order']}): {i['effect']}")
        needs_override = findings["allergies"] or [i for i in findings["interactions"] if i["severity"] == "major"]
        if needs_override and not override_reason.strip():
            return self._err("Override reason required: " + "; ".join(
                [f"{a['severity']} allergy to {a['substance']}" for a in findings["allergies"]]
                + [f"major interaction with {i['with_medication']}" for i in findings["interactions"] if i["severity"] == "major"]
            ))
        order_id = self._next_id("order", "ORD")
        self.orders[order_id] = {
            "order_id": order_id,
            "encounter_id": encounter_id,
            "patient_id": enc["patient_id"],
            "medication_id": medication_id,
            "dose_mg": dose_mg,
            "frequency_per_day": frequency_per_day,
            "route": route,
            "prescriber_id": prescriber_id,
            "status": "active",
            "ordered_at": datetime.datetime.now().isoformat(timespec="seconds"),
            "override_reason": override_reason.strip() if needs_override else None,
            "stop_reason": None,
            "stopped_on": None,
        }
        warnings = [
            f"moderate interaction with {i['with_medication']}: {i['effect']}"
            for i in findings["interactions"]
            if i["severity"] == "moderate"
        ]
        return {
            "success": True,
            "message": f"Ordered {med['name']} {dose_mg:g} mg {route} x{frequency_per_day}/day",
            "order_id": order_id,
            "warnings": warnings,
        }

    def discontinue_order(self, order_id: str, reason: str) -> dict:
        """Stop an active medication order.

        Args:
            order_id: Order id, e.g. ORD9003.
            reason: Why the order is stopped.
        """
        if not isinstance(order_id, str) or order_id not in self.orders:
            return self._err(f"Order {order_id} not found")
        order = self.orders[order_id]
        if order["status"] != "active":
            return self._err(f"Order {order_id} is {order['status']}")
        if not isinstance(reason, str) or not reason.strip():
            return self._err("A reason is required to discontinue an order")
        order["status"] = "discontinued"
        order["stop_reason"] = reason.strip()
        order["stopped_on"] = self.current_date
        return {"success": True, "message": f"Order {order_id} discontinued"}

    def transfer_bed(self, encounter_id: str, new_bed_id: str) -> dict:
        """Move an admitted patient to another bed. The old bed goes to cleaning.

        Rules: the new bed must exist, differ from the current one and be available.

        Args:
            encounter_id: Admitted encounter id.
            new_bed_id: Destination bed id.
        """
        enc, error = self._open_encounter(encounter_id)
        if error:
            return error
        if not isinstance(new_bed_id, str) or new_bed_id not in self.beds:
            return self._err(f"Bed {new_bed_id} not found")
        if new_bed_id == enc["bed_id"]:
            return self._err(f"Patient is already in bed {new_bed_id}")
        new_bed = self.beds[new_bed_id]
        if new_bed["status"] != "available":
            return self._err(f"Bed {new_bed_id} is {new_bed['status']}")
        old_bed_id = enc["bed_id"]
        old_bed = self.beds.get(old_bed_id)
        if old_bed is not None:
            old_bed["status"] = "cleaning"
            old_bed["patient_id"] = None
            old_bed["encounter_id"] = None
        new_bed["status"] = "occupied"
        new_bed["patient_id"] = enc["patient_id"]
        new_bed["encounter_id"] = encounter_id
        enc["bed_id"] = new_bed_id
        return {"success": True, "message": f"Moved {enc['patient_id']} from {old_bed_id} to {new_bed_id}"}

    def mark_bed_ready(self, bed_id: str) -> dict:
        """Mark a bed that has been cleaned as available for the next patient.

        Args:
            bed_id: Bed id in cleaning status.
        """
        if not isinstance(bed_id, str) or bed_id not in self.beds:
            return self._err(f"Bed {bed_id} not found")
        bed = self.beds[bed_id]
        if bed["status"] != "cleaning":
            return self._err(f"Bed {bed_id} is {bed['status']}, only beds in cleaning can be marked ready")
        bed["status"] = "available"
        return {"success": True, "message": f"Bed {bed_id} is available"}

    def discharge_patient(self, encounter_id: str, disposition: str, discharge_summary: str) -> dict:
        """Discharge an admitted patient: closes the encounter, completes all active medication
        orders, releases the bed to cleaning and updates the patient record.

        Rules: the encounter must have a primary diagnosis; disposition must be one of home,
        home_with_services, skilled_nursing, rehabilitation, transferred, against_medical_advice,
        deceased (which also marks the patient deceased); the summary must be at least 20
        characters.

        Args:
            encounter_id: Admitted encounter id.
            disposition: Discharge disposition code.
            discharge_summary: Free-text discharge summary (at least 20 characters).
        """
        enc, error = self._open_encounter(encounter_id)
        if error:
            return error
        if disposition not in DISPOSITIONS:
            return self._err(f"Unknown disposition {disposition!r}")
        if not isinstance(discharge_summary, str) or len(discharge_summary.strip()) < 20:
            return self._err("Discharge summary must be at least 20 characters")
        if not any(d["encounter_id"] == encounter_id and d["rank"] == "primary" for d in self.diagnoses.values()):
            return self._err(f"Encounter {encounter_id} has no primary diagnosis; code one before discharge")
        completed = []
        for order in self.orders.values():
            if order["encounter_id"] == encounter_id and order["status"] == "active":
                order["status"] = "completed"
                completed.append(order["order_id"])
        enc["status"] = "discharged"
        enc["discharge_date"] = self.current_date
        enc["disposition"] = disposition
        enc["discharge_summary"] = discharge_summary.strip()
        patient = self.patients[enc["patient_id"]]
        patient["current_encounter_id"] = None
        patient["last_discharge_date"] = self.current_date
        if disposition == "deceased":
            patient["status"] = "deceased"
        bed = self.beds.get(enc["bed_id"])
        if bed is not None:
            bed["status"] = "cleaning"
            bed["patient_id"] = None
            bed["encounter_id"] = None
        return {
            "success": True,
            "message": f"Discharged {enc['patient_id']} ({disposition})",
            "completed_orders": sorted(completed),
        }
