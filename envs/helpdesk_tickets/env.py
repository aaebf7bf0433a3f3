"""A customer-support helpdesk: customers raise tickets that are routed to queues, worked by agents
under tier-based SLAs, escalated when needed, resolved and rated.

SLA targets depend on the customer's tier and the ticket's priority; due times are computed from
the ticket's creation time. Agent and customer open-ticket counters are kept in step with ticket
status changes.
"""

import datetime


PRIORITIES = ("low", "normal", "high", "urgent")
CHANNELS = ("email", "web", "phone", "chat")
ACTIVE_STATUSES = ("new", "open", "pending")
AGENT_STATUSES = ("available", "away", "offline")
_FMT = "%Y-%m-%dT%H:%M:%S"


class HelpdeskTickets:
    """Tickets, customers, agents, queues, SLA policies, escalations and satisfaction surveys."""

    def __init__(self, init_config: dict):
        self.customers = {}
        self.agents = {}
        self.queues = {}
        self.sla_policies = {}
        self.tickets = {}
        self.escalations = {}
        self.surveys = {}
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
        return datetime.datetime.now().replace(microsecond=0)

    @staticmethod
    def _parse(ts):
        try:
            return datetime.datetime.strptime(ts, _FMT)
        except (TypeError, ValueError):
            return None

    def _due(self, customer_id, priority, created):
        tier = self.customers[customer_id]["tier"]
        pol = self.sla_policies[tier][priority]
        first = created + datetime.timedelta(minutes=pol["first_response_minutes"])
        resolve = created + datetime.timedelta(hours=pol["resolution_hours"])
        return first.strftime(_FMT), resolve.strftime(_FMT)

    def _ticket(self, ticket_id):
        t = self.tickets.get(ticket_id) if isinstance(ticket_id, str) else None
        if t is None:
            return None, self._fail(f"ticket {ticket_id} not found")
        return t, None

    def _agent(self, agent_id):
        a = self.agents.get(agent_id) if isinstance(agent_id, str) else None
        if a is None:
            return None, self._fail(f"agent {agent_id} not found")
        return a, None

    def _next(self, counter, prefix, width):
        self.counters[counter] += 1
        return f"{prefix}-{self.counters[counter]:0{width}d}"

    def _release(self, ticket):
        """Decrement the assignee's open count (ticket leaves the agent's active work)."""
        if ticket["assignee"] and ticket["assignee"] in self.agents:
            self.agents[ticket["assignee"]]["open_tickets"] -= 1

    # ------------------------------------------------------------------ queries

    def get_ticket(self, ticket_id: str) -> dict:
        """Return a ticket with its conversation and SLA fields.

        Args:
            ticket_id: Ticket id, e.g. "TCK-5012".
        """
        err = self._require_str(ticket_id=ticket_id)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        data = dict(t)
        data["ticket_id"] = ticket_id
        return {"success": True, "data": data}

    def list_queue(self, queue_id: str) -> dict:
        """List a queue's unresolved tickets, most urgent resolution deadline first.

        Args:
            queue_id: Queue id, e.g. "billing".
        """
        err = self._require_str(queue_id=queue_id)
        if err:
            return err
        q = self.queues.get(queue_id)
        if q is None:
            return self._fail(f"queue {queue_id} not found")
        rows = []
        for tid, t in self.tickets.items():
            if t["queue"] == queue_id and t["status"] in ACTIVE_STATUSES:
                rows.append({"ticket_id": tid, "subject": t["subject"], "priority": t["priority"],
                             "status": t["status"], "assignee": t["assignee"],
                             "resolution_due": t["resolution_due"], "sla_breached": t["sla_breached"]})
        rows.sort(key=lambda r: (r["resolution_due"], r["ticket_id"]))
        return {"success": True, "data": {"queue_id": queue_id, "name": q["name"], "tickets": rows}}

    def get_customer(self, customer_id: str) -> dict:
        """Return a customer's profile and a summary of all their tickets.

        Args:
            customer_id: Customer id, e.g. "CUS-1003".
        """
        err = self._require_str(customer_id=customer_id)
        if err:
            return err
        c = self.customers.get(customer_id)
        if c is None:
            return self._fail(f"customer {customer_id} not found")
        tickets = [{"ticket_id": tid, "subject": t["subject"], "status": t["status"], "priority": t["priority"],
                    "created_at": t["created_at"]}
                   for tid, t in sorted(self.tickets.items()) if t["customer"] == customer_id]
        data = dict(c)
        data["customer_id"] = customer_id
        data["tickets"] = tickets
        return {"success": True, "data": data}

    def agent_workload(self) -> dict:
        """Summarise every agent: status, level, queues, open tickets versus capacity and CSAT average."""
        rows = []
        for aid in sorted(self.agents):
            a = self.agents[aid]
            avg = round(a["csat_total"] / a["csat_count"], 2) if a["csat_count"] else None
            rows.append({"agent_id": aid, "name": a["name"], "status": a["status"], "level": a["level"],
                         "queues": a["queues"], "open_tickets": a["open_tickets"], "max_open": a["max_open"],
                         "csat_average": avg})
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates

    def create_ticket(self, customer_id: str, subject: str, description: str, priority: str = "normal",
                      queue_id: str = "general", channel: str = "email") -> dict:
        """Open a new ticket for a customer; SLA due times follow the customer's tier and the priority.

        Args:
            customer_id: Customer id.
            subject: 3 to 150 characters.
            description: The customer's problem statement (not empty).
            priority: low, normal (default), high or urgent.
            queue_id: An intake queue (default "general"); escalation-only queues are not allowed.
            channel: email (default), web, phone or chat.
        Rules: suspended customers cannot open tickets; standard-tier customers cannot open urgent
        tickets. Ticket ids come from the ticket counter (TCK-NNNN).
        """
        err = self._require_str(
            customer_id=customer_id, subject=subject, description=description, priority=priority,
            queue_id=queue_id, channel=channel)
        if err:
            return err
        c = self.customers.get(customer_id)
        if c is None:
            return self._fail(f"customer {customer_id} not found")
        if c["status"] != "active":
            return self._fail(f"customer {customer_id} is {c['status']} and cannot open tickets")
        if not isinstance(subject, str) or not (3 <= len(subject.strip()) <= 150):
            return self._fail("subject must be 3 to 150 characters")
        if not isinstance(description, str) or not description.strip():
            return self._fail("description must not be empty")
        if priority not in PRIORITIES:
            return self._fail(f"invalid priority '{priority}'; expected one of {', '.join(PRIORITIES)}")
        if priority == "urgent" and c["tier"] == "standard":
            return self._fail("urgent priority is only available to premium and enterprise customers")
        q = self.queues.get(queue_id)
        if q is None:
            return self._fail(f"queue {queue_id} not found")
        if not q["intake"]:
            return self._fail(f"queue {queue_id} only receives escalations")
        if channel not in CHANNELS:
            return self._fail(f"invalid channel '{channel}'; expected one of {', '.join(CHANNELS)}")
        now = self._now()
        first_due, res_due = self._due(customer_id, priority, now)
        tid = self._next("ticket", "TCK", 4)
        self.tickets[tid] = {
            "customer": customer_id, "subject": subject.strip(), "description": description.strip(),
            "channel": channel, "priority": priority, "status": "new", "queue": queue_id, "assignee": None,
            "created_at": now.strftime(_FMT), "first_response_due": first_due, "resolution_due": res_due,
            "first_response_at": None, "resolved_at": None, "resolution_note": None, "sla_breached": False,
            "escalation_level": 0, "satisfaction": None, "messages": {},
        }
        c["open_tickets"] += 1
        return {"success": True, "message": f"Ticket {tid} created in queue {queue_id}", "ticket_id": tid}

    def assign_ticket(self, ticket_id: str, agent_id: str) -> dict:
        """Assign (or reassign) an unresolved ticket to an agent.

        Args:
            ticket_id: Ticket id.
            agent_id: Agent id, e.g. "AG-07".
        Rules: the agent must be available, work the ticket's queue, have at least the queue's
        minimum level and be below their open-ticket capacity. A new ticket becomes open.
        Open counts move from the previous assignee to the new one.
        """
        err = self._require_str(ticket_id=ticket_id, agent_id=agent_id)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        a, err = self._agent(agent_id)
        if err:
            return err
        if t["status"] not in ACTIVE_STATUSES:
            return self._fail(f"ticket {ticket_id} is {t['status']} and cannot be assigned")
        if t["assignee"] == agent_id:
            return self._fail(f"ticket {ticket_id} is already assigned to {agent_id}")
        if a["status"] != "available":
            return self._fail(f"agent {agent_id} is {a['status']}")
        if t["queue"] not in a["queues"]:
            return self._fail(f"agent {agent_id} does not work queue {t['queue']}")
        if a["level"] < self.queues[t["queue"]]["min_level"]:
            return self._fail(f"queue {t['queue']} requires level {self.queues[t['queue']]['min_level']} agents")
        if a["open_tickets"] >= a["max_open"]:
            return self._fail(f"agent {agent_id} is at capacity ({a['max_open']} open tickets)")
        self._release(t)
        t["assignee"] = agent_id
        a["open_tickets"] += 1
        if t["status"] == "new":
            t["status"] = "open"
        return {"success": True, "message": f"Ticket {ticket_id} assigned to {agent_id}"}

    def reply_to_ticket(self, ticket_id: str, agent_id: str, body: str, await_customer: bool = False) -> dict:
        """Send a public reply to the customer from the ticket's assignee.

        Args:
            ticket_id: Ticket id.
            agent_id: Must be the ticket's current assignee.
            body: Reply text (not empty, at most 10000 characters).
            await_customer: If true the ticket goes to pending (waiting on the customer);
                otherwise it is (or stays) open.
        The first reply records the first response time.
        """
        err = self._require_str(ticket_id=ticket_id, agent_id=agent_id, body=body)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if agent_id not in self.agents:
            return self._fail(f"agent {agent_id} not found")
        if t["status"] not in ACTIVE_STATUSES:
            return self._fail(f"ticket {ticket_id} is {t['status']}; replies are closed")
        if t["assignee"] != agent_id:
            return self._fail(f"only the assignee ({t['assignee']}) can reply to {ticket_id}")
        if not isinstance(body, str) or not body.strip() or len(body) > 10000:
            return self._fail("reply body must be 1 to 10000 characters")
        if not isinstance(await_customer, bool):
            return self._fail("await_customer must be a boolean")
        now = self._now().strftime(_FMT)
        mid = f"M{len(t['messages']) + 1}"
        t["messages"][mid] = {"from": agent_id, "body": body.strip(), "sent_at": now}
        first = t["first_response_at"] is None
        if first:
            t["first_response_at"] = now
        t["status"] = "pending" if await_customer else "open"
        return {"success": True, "message": f"Reply {mid} sent on {ticket_id}", "status": t["status"],
                "first_response": first}

    def change_priority(self, ticket_id: str, priority: str) -> dict:
        """Change an unresolved ticket's priority and recompute its SLA due times from creation.

        Args:
            ticket_id: Ticket id.
            priority: low, normal, high or urgent (urgent needs a premium or enterprise customer).
        """
        err = self._require_str(ticket_id=ticket_id, priority=priority)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if t["status"] not in ACTIVE_STATUSES:
            return self._fail(f"ticket {ticket_id} is {t['status']}")
        if priority not in PRIORITIES:
            return self._fail(f"invalid priority '{priority}'; expected one of {', '.join(PRIORITIES)}")
        if priority == t["priority"]:
            return self._fail(f"ticket {ticket_id} already has priority {priority}")
        if priority == "urgent" and self.customers[t["customer"]]["tier"] == "standard":
            return self._fail("urgent priority is only available to premium and enterprise customers")
        t["priority"] = priority
        t["first_response_due"], t["resolution_due"] = self._due(t["customer"], priority, self._parse(t["created_at"]))
        return {"success": True, "message": f"Ticket {ticket_id} priority set to {priority}",
                "first_response_due": t["first_response_due"], "resolution_due": t["resolution_due"]}

    def escalate_ticket(self, ticket_id: str, reason: str) -> dict:
        """Escalate an unresolved ticket to its queue's escalation queue.

        Args:
            ticket_id: Ticket id.
            reason: Why the ticket is escalated (at least 10 characters).
        Effects: the ticket moves to the escalation queue and is unassigned (the previous
        assignee's open count drops), its escalation level rises by one, its priority is raised
        one step (urgent stays urgent, standard-tier customers stop at high) with SLA due times
        recomputed, it becomes new (awaiting pickup in the new queue), and an escalation record
        ESC-NNNN is written.
        """
        err = self._require_str(ticket_id=ticket_id, reason=reason)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if t["status"] not in ACTIVE_STATUSES:
            return self._fail(f"ticket {ticket_id} is {t['status']} and cannot be escalated")
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            return self._fail("escalation reason must be at least 10 characters")
        src = t["queue"]
        target = self.queues[src]["escalation_queue"]
        if not target:
            return self._fail(f"queue {src} has no escalation path")
        old_priority = t["priority"]
        idx = PRIORITIES.index(old_priority)
        cap = PRIORITIES.index("high") if self.customers[t["customer"]]["tier"] == "standard" else len(PRIORITIES) - 1
        new_priority = PRIORITIES[max(idx, min(idx + 1, cap))]
        self._release(t)
        previous = t["assignee"]
        t["assignee"] = None
        t["queue"] = target
        t["status"] = "new"
        t["escalation_level"] += 1
        if new_priority != old_priority:
            t["priority"] = new_priority
            t["first_response_due"], t["resolution_due"] = self._due(t["customer"], new_priority,
                                                                     self._parse(t["created_at"]))
        eid = self._next("escalation", "ESC", 4)
        self.escalations[eid] = {"ticket": ticket_id, "from_queue": src, "to_queue": target,
                                 "previous_assignee": previous, "reason": reason.strip(),
                                 "priority_before": old_priority, "priority_after": new_priority,
                                 "escalated_at": self._now().strftime(_FMT)}
        return {"success": True, "message": f"Ticket {ticket_id} escalated from {src} to {target}",
                "escalation_id": eid, "priority": new_priority, "escalation_level": t["escalation_level"]}

    def resolve_ticket(self, ticket_id: str, agent_id: str, resolution_note: str) -> dict:
        """Mark a ticket resolved by its assignee.

        Args:
            ticket_id: Ticket id.
            agent_id: Must be the current assignee.
            resolution_note: What fixed the problem (at least 10 characters).
        Rules: the ticket must have had a first response. The agent's and the customer's open
        counts drop by one.
        """
        err = self._require_str(ticket_id=ticket_id, agent_id=agent_id, resolution_note=resolution_note)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if t["status"] not in ("open", "pending"):
            return self._fail(f"ticket {ticket_id} is {t['status']} and cannot be resolved")
        if t["assignee"] != agent_id:
            return self._fail(f"only the assignee ({t['assignee']}) can resolve {ticket_id}")
        if t["first_response_at"] is None:
            return self._fail(f"ticket {ticket_id} has not been answered yet; reply before resolving")
        if not isinstance(resolution_note, str) or len(resolution_note.strip()) < 10:
            return self._fail("resolution note must be at least 10 characters")
        t["status"] = "resolved"
        t["resolved_at"] = self._now().strftime(_FMT)
        t["resolution_note"] = resolution_note.strip()
        self._release(t)
        self.customers[t["customer"]]["open_tickets"] -= 1
        return {"success": True, "message": f"Ticket {ticket_id} resolved"}

    def close_ticket(self, ticket_id: str) -> dict:
        """Close a resolved ticket for good (it can no longer be reopened or rated differently).

        Args:
            ticket_id: Ticket id.
        """
        err = self._require_str(ticket_id=ticket_id)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if t["status"] != "resolved":
            return self._fail(f"ticket {ticket_id} is {t['status']}; only resolved tickets can be closed")
        t["status"] = "closed"
        return {"success": True, "message": f"Ticket {ticket_id} closed"}

    def record_satisfaction(self, ticket_id: str, rating: int, comment: str = "") -> dict:
        """Record the customer's satisfaction survey for a resolved or closed ticket.

        Args:
            ticket_id: Ticket id.
            rating: Integer 1 (very unhappy) to 5 (very happy).
            comment: Optional free text, at most 1000 characters.
        Rules: one survey per ticket; the ticket must have an assignee, whose CSAT totals are
        updated. Surveys get ids SRV-NNNN.
        """
        err = self._require_str(ticket_id=ticket_id, comment=comment)
        if err:
            return err
        t, err = self._ticket(ticket_id)
        if err:
            return err
        if t["status"] not in ("resolved", "closed"):
            return self._fail(f"ticket {ticket_id} is {t['status']}; surveys are only sent after resolution")
        if t["satisfaction"] is not None:
            return self._fail(f"ticket {ticket_id} already has a satisfaction rating")
        if not isinstance(rating, int) or isinstance(rating, bool) or not (1 <= rating <= 5):
            return self._fail("rating must be an integer from 1 to 5")
        if not isinstance(comment, str) or len(comment) > 1000:
            return self._fail("comment must be a string of at most 1000 characters")
        agent = t["assignee"]
        if agent not in self.agents:
            return self._fail(f"ticket {ticket_id} has no assignee to rate")
        sid = self._next("survey", "SRV", 4)
        self.surveys[sid] = {"ticket": ticket_id, "customer": t["customer"], "agent": agent, "rating": rating,
                             "comment": comment.strip(), "submitted_at": self._now().strftime(_FMT)}
        t["satisfaction"] = rating
        self.agents[agent]["csat_total"] += rating
        self.agents[agent]["csat_count"] += 1
        return {"success": True, "message": f"Survey {sid} recorded for {ticket_id}", "survey_id": sid}

    def flag_sla_breaches(self, as_of: str) -> dict:
        """Mark unresolved tickets whose SLA deadlines have passed at the given time.

        Args:
            as_of: Timestamp to evaluate, YYYY-MM-DDTHH:MM:SS.
        Rules: only new or open tickets are checked (pending tickets wait on the customer and
        their clock is paused); a ticket breaches when it has no first response after its
        first-response due time, or is still unresolved after its resolution due time. Tickets
        already flagged are skipped.
        """
        err = self._require_str(as_of=as_of)
        if err:
            return err
        at = self._parse(as_of)
        if at is None:
            return self._fail("as_of must be a timestamp like 2024-06-03T14:00:00")
        flagged = []
        for tid in sorted(self.tickets):
            t = self.tickets[tid]
            if t["status"] not in ("new", "open") or t["sla_breached"]:
                continue
            late_first = t["first_response_at"] is None and at > self._parse(t["first_response_due"])
            late_res = at > self._parse(t["resolution_due"])
            if late_first or late_res:
                t["sla_breached"] = True
                flagged.append(tid)
        return {"success": True, "message": f"{len(flagged)} tickets flagged as SLA breached", "tickets": flagged}

    def set_agent_status(self, agent_id: str, status: str) -> dict:
        """Change an agent's availability.

        Args:
            agent_id: Agent id.
            status: available, away or offline.
        Rules: an agent holding new or open tickets cannot go offline (reassign them first).
        """
        err = self._require_str(agent_id=agent_id, status=status)
        if err:
            return err
        a, err = self._agent(agent_id)
        if err:
            return err
        if status not in AGENT_STATUSES:
            return self._fail(f"invalid status '{status}'; expected one of {', '.join(AGENT_STATUSES)}")
        if a["status"] == status:
            return self._fail(f"agent {agent_id} is already {status}")
        if status == "offline":
            busy = [tid for tid, t in self.tickets.items()
                    if t["assignee"] == agent_id and t["status"] in ("new", "open")]
            if busy:
                return self._fail(f"agent {agent_id} still holds {len(busy)} new or open tickets")
        a["status"] = status
        return {"success": True, "message": f"Agent {agent_id} is now {status}"}
