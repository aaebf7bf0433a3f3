"""A company mail system seen through its webmail client: mailboxes with folders, labels, drafts,
sending with recipient validation and internal delivery, and per-mailbox filters.

Folder unread counters and mailbox storage usage are maintained on every change. Mail to the
organisation's own domains is delivered straight into the recipients' inboxes, where their
enabled filters are applied.
"""

import datetime
import re
import uuid


FILTER_FIELDS = ("from", "to", "subject")
FILTER_ACTIONS = ("move", "label", "mark_read", "flag")
_ADDR = re.compile(r"[a-z0-9._%+-]+@[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}")


class EmailClient:
    """Mailboxes, folders, messages, labels, drafts and filters."""

    def __init__(self, init_config: dict):
        self.settings = {}
        self.mailboxes = {}
        self.folders = {}
        self.labels = {}
        self.messages = {}
        self.filters = {}
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

    def _folder_of(self, mailbox, name):
        for fid, f in self.folders.items():
            if f["mailbox"] == mailbox and f["name"] == name:
                return fid
        return None

    def _message(self, message_id):
        m = self.messages.get(message_id) if isinstance(message_id, str) else None
        if m is None:
            return None, self._fail(f"message {message_id} not found")
        return m, None

    @staticmethod
    def _size_kb(subject, body):
        return max(1, -(-len((subject + body).encode("utf-8")) // 1024))

    def _addr_list(self, value, field):
        if value is None:
            return [], None
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            return None, f"{field} must be a list of email addresses"
        out = []
        for a in value:
            a = a.strip().lower()
            if not _ADDR.fullmatch(a):
                return None, f"invalid email address '{a}' in {field}"
            if a not in out:
                out.append(a)
        return out, None

    def _internal(self, address):
        return address.split("@", 1)[1] in self.settings["org_domains"]

    def _next_msg(self):
        self.counters["message"] += 1
        return f"msg-{self.counters['message']}"

    def _move(self, m, folder_id):
        """Move a message between folders keeping unread counters right."""
        if not m["read"]:
            self.folders[m["folder"]]["unread"] -= 1
            self.folders[folder_id]["unread"] += 1
        m["folder"] = folder_id

    def _matches(self, flt, m):
        needle = flt["contains"].lower()
        if flt["field"] == "from":
            return needle in m["from"].lower()
        if flt["field"] == "to":
            return any(needle in a for a in m["to"] + m["cc"])
        return needle in m["subject"].lower()

    def _apply_filter(self, flt, m):
        """Apply one filter action to a message; returns True if anything changed."""
        if flt["action"] == "move":
            if m["folder"] != flt["target"]:
                self._move(m, flt["target"])
                return True
        elif flt["action"] == "label":
            if flt["target"] not in m["labels"]:
                m["labels"] = m["labels"] + [flt["target"]]
                return True
        elif flt["action"] == "mark_read":
            if not m["read"]:
                m["read"] = True
                self.folders[m["folder"]]["unread"] -= 1
                return True
        elif flt["action"] == "flag":
            if not m["flagged"]:
                m["flagged"] = True
                return True
        return False

    # ------------------------------------------------------------------ queries

    def list_mailboxes(self) -> dict:
        """List all mailboxes with display name, status and storage use."""
        rows = [{"address": a, "display_name": mb["display_name"], "status": mb["status"],
                 "used_kb": mb["used_kb"], "quota_kb": mb["quota_kb"]} for a, mb in sorted(self.mailboxes.items())]
        return {"success": True, "data": rows}

    def get_mailbox_summary(self, mailbox: str) -> dict:
        """Return a mailbox's folders (with message and unread counts), labels, filters and storage.

        Args:
            mailbox: Mailbox address, e.g. "ana@northwind.io".
        """
        err = self._require_str(mailbox=mailbox)
        if err:
            return err
        mb = self.mailboxes.get(mailbox)
        if mb is None:
            return self._fail(f"mailbox {mailbox} not found")
        counts = {}
        for m in self.messages.values():
            if m["mailbox"] == mailbox:
                counts[m["folder"]] = counts.get(m["folder"], 0) + 1
        folders = [{"folder_id": fid, "name": f["name"], "system": f["system"], "messages": counts.get(fid, 0),
                    "unread": f["unread"]} for fid, f in sorted(self.folders.items()) if f["mailbox"] == mailbox]
        labels = [{"label_id": lid, "name": lb["name"]}
                  for lid, lb in sorted(self.labels.items()) if lb["mailbox"] == mailbox]
        filters = [dict(f, filter_id=k) for k, f in sorted(self.filters.items()) if f["mailbox"] == mailbox]
        return {"success": True, "data": {"mailbox": mailbox, "display_name": mb["display_name"],
                                          "status": mb["status"],
                                          "used_kb": mb["used_kb"], "quota_kb": mb["quota_kb"], "folders": folders,
                                          "labels": labels, "filters": filters}}

    def list_folder(self, folder_id: str) -> dict:
        """List the messages of a folder, newest first (drafts without a date come first).

        Args:
            folder_id: Folder id, e.g. "fld-101".
        """
        err = self._require_str(folder_id=folder_id)
        if err:
            return err
        f = self.folders.get(folder_id)
        if f is None:
            return self._fail(f"folder {folder_id} not found")
        rows = [{"message_id": mid, "from": m["from"], "subject": m["subject"], "date": m["date"], "read": m["read"],
                 "flagged": m["flagged"], "labels": m["labels"]}
                for mid, m in self.messages.items() if m["folder"] == folder_id]
        rows.sort(key=lambda r: (r["date"] or "9999", r["message_id"]), reverse=True)
        return {"success": True, "data": {"folder_id": folder_id, "name": f["name"], "unread": f["unread"],
                                          "messages": rows}}

    def search_messages(self, mailbox: str, query: str) -> dict:
        """Find a mailbox's messages whose sender, subject or body contains the query (case-insensitive).

        Args:
            mailbox: Mailbox address.
            query: Text to look for, at least 2 characters.
        Messages in Trash and Spam are excluded.
        """
        err = self._require_str(mailbox=mailbox, query=query)
        if err:
            return err
        if mailbox not in self.mailboxes:
            return self._fail(f"mailbox {mailbox} not found")
        if not isinstance(query, str) or len(query.strip()) < 2:
            return self._fail("query must be at least 2 characters")
        q = query.strip().lower()
        rows = []
        for mid, m in sorted(self.messages.items()):
            if m["mailbox"] != mailbox or self.folders[m["folder"]]["name"] in ("Trash", "Spam"):
                continue
            if q in m["from"].lower() or q in m["subject"].lower() or q in m["body"].lower():
                rows.append({"message_id": mid, "folder": self.folders[m["folder"]]["name"], "from": m["from"],
                             "subject": m["subject"], "date": m["date"]})
        return {"success": True, "data": rows}

    # ------------------------------------------------------------------ updates

    def open_message(self, message_id: str) -> dict:
        """Return a message's full content and mark it as read (updating the folder's unread count).

        Args:
            message_id: Message id, e.g. "msg-5003".
        """
        err = self._require_str(message_id=message_id)
        if err:
            return err
        m, err = self._message(message_id)
        if err:
            return err
        was_unread = not m["read"]
        if was_unread:
            m["read"] = True
            self.folders[m["folder"]]["unread"] -= 1
        data = dict(m)
        data["message_id"] = message_id
        return {"success": True, "data": data, "marked_read": was_unread}

    def create_draft(self, mailbox: str, to: list, subject: str, body: str, cc: list | None = None) -> dict:
        """Save a new draft in the mailbox's Drafts folder.

        Args:
            mailbox: Sender mailbox (must be active).
            to: Recipient addresses (may be empty while drafting).
            subject: Subject line, at most 200 characters.
            body: Message text.
            cc: Optional copy recipients.
        The mailbox signature is appended to the body; the draft's size counts toward the quota.
        """
        err = self._require_str(mailbox=mailbox, subject=subject, body=body)
        if err:
            return err
        mb = self.mailboxes.get(mailbox)
        if mb is None:
            return self._fail(f"mailbox {mailbox} not found")
        if mb["status"] != "active":
            return self._fail(f"mailbox {mailbox} is {mb['status']}")
        to_l, err = self._addr_list(to, "to")
        if err:
            return self._fail(err)
        cc_l, err = self._addr_list(cc, "cc")
        if err:
            return self._fail(err)
        if not isinstance(subject, str) or len(subject) > 200:
            return self._fail("subject must be a string of at most 200 characters")
        if not isinstance(body, str):
            return self._fail("body must be a string")
        if not subject.strip() and not body.strip():
            return self._fail("a draft needs a subject or a body")
        full = body + (f"\n\n-- \n{mb['signature']}" if mb["signature"] else "")
        size = self._size_kb(subject, full)
        if mb["used_kb"] + size > mb["quota_kb"]:
            return self._fail(f"mailbox {mailbox} is over its storage quota")
        mid = self._next_msg()
        self.messages[mid] = {"mailbox": mailbox, "folder": self._folder_of(mailbox, "Drafts"), "from": mailbox,
                              "to": to_l, "cc": cc_l, "subject": subject, "body": full, "date": None, "read": True,
                              "flagged": False, "labels": [], "size_kb": size, "is_draft": True,
                              "message_id_header": None, "has_attachments": False}
        mb["used_kb"] += size
        return {"success": True, "message": f"Draft {mid} saved", "draft_id": mid}

    def update_draft(self, draft_id: str, to: list | None = None, subject: str | None = None,
                     body: str | None = None) -> dict:
        """Edit a draft's recipients, subject or body (only the given fields change).

        Args:
            draft_id: Draft message id.
            to: New recipient list.
            subject: New subject (at most 200 characters).
            body: New body text (replaces the whole body, signature included).
        """
        err = self._require_str(draft_id=draft_id)
        if err:
            return err
        m, err = self._message(draft_id)
        if err:
            return err
        if not m["is_draft"]:
            return self._fail(f"{draft_id} is not a draft")
        if to is None and subject is None and body is None:
            return self._fail("nothing to update")
        to_l = None
        if to is not None:
            to_l, err = self._addr_list(to, "to")
            if err:
                return self._fail(err)
        if subject is not None and (not isinstance(subject, str) or len(subject) > 200):
            return self._fail("subject must be a string of at most 200 characters")
        if body is not None and not isinstance(body, str):
            return self._fail("body must be a string")
        new_subject = m["subject"] if subject is None else subject
        new_body = m["body"] if body is None else body
        size = self._size_kb(new_subject, new_body)
        mb = self.mailboxes[m["mailbox"]]
        if mb["used_kb"] - m["size_kb"] + size > mb["quota_kb"]:
            return self._fail(f"mailbox {m['mailbox']} is over its storage quota")
        changed = []
        if to_l is not None and to_l != m["to"]:
            m["to"] = to_l
            changed.append("to")
        if subject is not None and subject != m["subject"]:
            m["subject"] = subject
            changed.append("subject")
        if body is not None and body != m["body"]:
            m["body"] = body
            changed.append("body")
        if not changed:
            return self._fail("the draft already has these values")
        mb["used_kb"] += size - m["size_kb"]
        m["size_kb"] = size
        return {"success": True, "message": f"Draft {draft_id} updated", "changed": changed}

    def send_draft(self, draft_id: str) -> dict:
        """Send a draft: validate recipients, file it in Sent and deliver internal copies.

        Args:
            draft_id: Draft message id.
        Rules: the sender mailbox must be active; there must be 1 to max_recipients distinct
        recipients (to + cc); recipients in blocked domains are refused; recipients in the
        organisation's domains must be existing active mailboxes with enough free storage.
        Effects: the draft moves to Sent with the send time and a new Message-ID; each internal
        recipient gets an unread copy in their Inbox (storage charged), after which their
        enabled filters are applied to it in order.
        """
        err = self._require_str(draft_id=draft_id)
        if err:
            return err
        m, err = self._message(draft_id)
        if err:
            return err
        if not m["is_draft"]:
            return self._fail(f"{draft_id} is not a draft")
        sender = self.mailboxes[m["mailbox"]]
        if sender["status"] != "active":
            return self._fail(f"mailbox {m['mailbox']} is {sender['status']}")
        recipients = []
        for a in m["to"] + m["cc"]:
            if a not in recipients:
                recipients.append(a)
        if not recipients:
            return self._fail("add at least one recipient before sending")
        if len(recipients) > self.settings["max_recipients"]:
            return self._fail(f"at most {self.settings['max_recipients']} recipients per message")
        if not m["subject"].strip():
            return self._fail("the subject is empty")
        internal = []
        for a in recipients:
            domain = a.split("@", 1)[1]
            if domain in self.settings["blocked_domains"]:
                return self._fail(f"sending to {domain} is blocked by company policy")
            if self._internal(a):
                rb = self.mailboxes.get(a)
                if rb is None:
                    return self._fail(f"recipient {a} does not exist")
                if rb["status"] != "active":
                    return self._fail(f"recipient {a} is {rb['status']} and cannot receive mail")
                if rb["used_kb"] + m["size_kb"] > rb["quota_kb"]:
                    return self._fail(f"recipient {a} mailbox is full")
                if a != m["mailbox"]:
                    internal.append(a)
        now = datetime.datetime.now().replace(microsecond=0).isoformat()
        header = f"<{uuid.uuid4()}@{m['mailbox'].split('@', 1)[1]}>"
        m["folder"] = self._folder_of(m["mailbox"], "Sent")
        m["is_draft"] = False
        m["date"] = now
        m["message_id_header"] = header
        delivered = {}
        for a in internal:
            cid = self._next_msg()
            copy = {"mailbox": a, "folder": self._folder_of(a, "Inbox"), "from": m["mailbox"], "to": list(m["to"]),
                    "cc": list(m["cc"]), "subject": m["subject"], "body": m["body"], "date": now, "read": False,
                    "flagged": False, "labels": [], "size_kb": m["size_kb"], "is_draft": False,
                    "message_id_header": header, "has_attachments": m["has_attachments"]}
            self.messages[cid] = copy
            self.folders[copy["folder"]]["unread"] += 1
            self.mailboxes[a]["used_kb"] += m["size_kb"]
            for fid in sorted(self.filters):
                flt = self.filters[fid]
                if flt["mailbox"] == a and flt["enabled"] and self._matches(flt, copy):
                    self._apply_filter(flt, copy)
            delivered[a] = cid
        external = [a for a in recipients if not self._internal(a)]
        return {"success": True, "message": f"Sent {draft_id} to {len(recipients)} recipients",
                "delivered_internally": delivered, "external_recipients": external}

    def move_message(self, message_id: str, folder_id: str) -> dict:
        """Move a message to another folder of the same mailbox.

        Args:
            message_id: Message id.
            folder_id: Target folder id in the same mailbox.
        Rules: drafts can only be moved to Trash; nothing can be moved into Drafts.
        """
        err = self._require_str(message_id=message_id, folder_id=folder_id)
        if err:
            return err
        m, err = self._message(message_id)
        if err:
            return err
        f = self.folders.get(folder_id)
        if f is None:
            return self._fail(f"folder {folder_id} not found")
        if f["mailbox"] != m["mailbox"]:
            return self._fail(f"folder {folder_id} belongs to another mailbox")
        if m["folder"] == folder_id:
            return self._fail(f"{message_id} is already in {f['name']}")
        if f["name"] == "Drafts":
            return self._fail("messages cannot be moved into Drafts")
        if m["is_draft"] and f["name"] != "Trash":
            return self._fail("drafts can only be moved to Trash")
        self._move(m, folder_id)
        return {"success": True, "message": f"{message_id} moved to {f['name']}"}

    def apply_label(self, message_id: str, label_id: str) -> dict:
        """Attach one of the mailbox's labels to a message.

        Args:
            message_id: Message id.
            label_id: Label id of the same mailbox, e.g. "lbl-12".
        """
        err = self._require_str(message_id=message_id, label_id=label_id)
        if err:
            return err
        m, err = self._message(message_id)
        if err:
            return err
        lbl = self.labels.get(label_id)
        if lbl is None:
            return self._fail(f"label {label_id} not found")
        if lbl["mailbox"] != m["mailbox"]:
            return self._fail(f"label {label_id} belongs to another mailbox")
        if label_id in m["labels"]:
            return self._fail(f"{message_id} already has label {lbl['name']}")
        m["labels"] = m["labels"] + [label_id]
        return {"success": True, "message": f"Label {lbl['name']} applied to {message_id}"}

    def set_flags(self, message_id: str, read: bool | None = None, flagged: bool | None = None) -> dict:
        """Mark a message read/unread and/or flagged/unflagged.

        Args:
            message_id: Message id.
            read: New read state (omit to keep).
            flagged: New flagged state (omit to keep).
        Rules: drafts are always read.
        """
        err = self._require_str(message_id=message_id)
        if err:
            return err
        m, err = self._message(message_id)
        if err:
            return err
        if read is None and flagged is None:
            return self._fail("give read and/or flagged")
        if (read is not None and not isinstance(read, bool)) or (flagged is not None and not isinstance(flagged, bool)):
            return self._fail("read and flagged must be booleans")
        if m["is_draft"] and read is False:
            return self._fail("drafts cannot be marked unread")
        changed = []
        if read is not None and read != m["read"]:
            m["read"] = read
            self.folders[m["folder"]]["unread"] += -1 if read else 1
            changed.append("read")
        if flagged is not None and flagged != m["flagged"]:
            m["flagged"] = flagged
            changed.append("flagged")
        if not changed:
            return self._fail("the message already has these flags")
        return {"success": True, "message": f"Flags of {message_id} updated", "changed": changed}

    def delete_message(self, message_id: str) -> dict:
        """Move a message to Trash, or delete it permanently if it is already in Trash.

        Args:
            message_id: Message id.
        Permanent deletion frees the message's storage.
        """
        err = self._require_str(message_id=message_id)
        if err:
            return err
        m, err = self._message(message_id)
        if err:
            return err
        trash = self._folder_of(m["mailbox"], "Trash")
        if m["folder"] != trash:
            self._move(m, trash)
            return {"success": True, "message": f"{message_id} moved to Trash", "permanent": False}
        if not m["read"]:
            self.folders[trash]["unread"] -= 1
        self.mailboxes[m["mailbox"]]["used_kb"] -= m["size_kb"]
        del self.messages[message_id]
        return {"success": True, "message": f"{message_id} permanently deleted", "permanent": True}

    def create_filter(self, mailbox: str, field: str, contains: str, action: str, target: str = "") -> dict:
        """Create an enabled filter for incoming mail of a mailbox.

        Args:
            mailbox: Mailbox address.
            field: from, to or subject.
            contains: Case-insensitive text to match, at least 3 characters.
            action: move (target = folder id), label (target = label id), mark_read or flag
                (no target).
            target: Folder or label id of the same mailbox when the action needs one.
        Rules: at most 20 filters per mailbox; filters cannot move mail into Drafts or Sent.
        """
        err = self._require_str(mailbox=mailbox, field=field, contains=contains, action=action, target=target)
        if err:
            return err
        if mailbox not in self.mailboxes:
            return self._fail(f"mailbox {mailbox} not found")
        if field not in FILTER_FIELDS:
            return self._fail(f"field must be one of {', '.join(FILTER_FIELDS)}")
        if not isinstance(contains, str) or len(contains.strip()) < 3:
            return self._fail("contains must be at least 3 characters")
        if action not in FILTER_ACTIONS:
            return self._fail(f"action must be one of {', '.join(FILTER_ACTIONS)}")
        if action == "move":
            f = self.folders.get(target)
            if f is None or f["mailbox"] != mailbox:
                return self._fail(f"target folder {target} not found in {mailbox}")
            if f["name"] in ("Drafts", "Sent"):
                return self._fail(f"filters cannot move mail into {f['name']}")
        elif action == "label":
            lbl = self.labels.get(target)
            if lbl is None or lbl["mailbox"] != mailbox:
                return self._fail(f"target label {target} not found in {mailbox}")
        elif target:
            return self._fail(f"action {action} takes no target")
        if sum(1 for f in self.filters.values() if f["mailbox"] == mailbox) >= 20:
            return self._fail(f"{mailbox} already has 20 filters")
        self.counters["filter"] += 1
        fid = f"flt-{self.counters['filter']}"
        self.filters[fid] = {"mailbox": mailbox, "field": field, "contains": contains.strip(), "action": action,
                             "target": target or None, "enabled": True}
        return {"success": True, "message": f"Filter {fid} created", "filter_id": fid}

    def run_filters(self, mailbox: str) -> dict:
        """Apply the mailbox's enabled filters, in id order, to every message in its Inbox.

        Args:
            mailbox: Mailbox address.
        Returns the ids of messages that changed.
        """
        err = self._require_str(mailbox=mailbox)
        if err:
            return err
        if mailbox not in self.mailboxes:
            return self._fail(f"mailbox {mailbox} not found")
        flts = [self.filters[k] for k in sorted(self.filters)
                if self.filters[k]["mailbox"] == mailbox and self.filters[k]["enabled"]]
        if not flts:
            return self._fail(f"{mailbox} has no enabled filters")
        inbox = self._folder_of(mailbox, "Inbox")
        changed = []
        for mid in sorted(self.messages):
            m = self.messages[mid]
            if m["folder"] != inbox:
                continue
            hit = False
            for flt in flts:
                if self._matches(flt, m):
                    hit = self._apply_filter(flt, m) or hit
            if hit:
                changed.append(mid)
        return {"success": True, "message": f"{len(changed)} messages changed by filters", "messages": changed}
