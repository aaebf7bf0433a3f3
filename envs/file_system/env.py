"""A multi-user hierarchical file system with POSIX-style permissions, per-user quotas and a trash can.

Nodes are keyed by their absolute, normalised path ("/home/alice/report.txt"). Every tool acts as
the session's current user. Files count against their owner's quota, including while they sit in
the trash; only emptying the trash frees the space.
"""

import datetime


_MODE_CHARS = "rwxrwxrwx"
_MAX_NAME = 255


class FileSystem:
    """Shared file server with users, permissions, quotas, trash and restore."""

    def __init__(self, init_config: dict):
        self.current_user = ""
        self.users = {}
        self.nodes = {}
        self.trash = {}
        self.trash_seq = 0

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

    def _now(self):
        return datetime.datetime.now().replace(microsecond=0).isoformat()

    @staticmethod
    def _check_path(path):
        """Returns an error string for a malformed path, or None."""
        if not isinstance(path, str) or not path:
            return "path must be a non-empty string"
        if not path.startswith("/"):
            return f"path '{path}' must be absolute (start with '/')"
        if path == "/":
            return None
        if path.endswith("/"):
            return f"path '{path}' must not end with '/'"
        for part in path[1:].split("/"):
            if part == "":
                return f"path '{path}' contains an empty segment"
            if part in (".", ".."):
                return f"path '{path}' must be normalised (no '.' or '..' segments)"
            if len(part) > _MAX_NAME:
                return f"name '{part[:20]}...' is longer than {_MAX_NAME} characters"
            if "\x00" in part:
                return "names must not contain NUL characters"
        return None

    @staticmethod
    def _parent(path):
        if path == "/":
            return None
        head = path.rsplit("/", 1)[0]
        return head or "/"

    @staticmethod
    def _is_under(path, ancestor):
        if ancestor == "/":
            return path != "/"
        return path.startswith(ancestor + "/")

    def _protected(self, path):
        """The root, top-level directories and home directories cannot be moved or deleted."""
        return path == "/" or self._parent(path) in ("/", "/home")

    def _subtree(self, path):
        """The node path and all its descendants, parents before children."""
        paths = [path]
        if self.nodes[path]["type"] == "dir":
            paths += [p for p in self.nodes if self._is_under(p, path)]
        return sorted(paths, key=lambda p: (p.count("/"), p))

    def _user(self):
        return self.users.get(self.current_user)

    def _can(self, node, perm):
        """perm is one of 'r', 'w', 'x'."""
        user = self._user()
        if user is None:
            return False
        if user.get("is_admin"):
            return True
        mode = node["mode"]
        idx = "rwx".index(perm)
        if node["owner"] == self.current_user:
            return mode[idx] == perm
        if node["group"] in user.get("groups", []):
            return mode[3 + idx] == perm
        return mode[6 + idx] == perm

    def _session(self):
        if self._user() is None:
            return "no valid user is logged in; call switch_user first"
        return None

    @staticmethod
    def _text_size(content):
        return len(content.encode("utf-8"))

    def _free(self, username):
        u = self.users[username]
        return u["quota_bytes"] - u["used_bytes"]

    # ------------------------------------------------------------------ queries

    def list_directory(self, path: str) -> dict:
        """List the entries of a directory.

        Args:
            path: Absolute directory path, e.g. "/home/alice/projects".
        Rules: the current user needs read ('r') permission on the directory. Entries are
        returned sorted by name with type, owner, mode, size (files) and modification time.
        """
        err = self._require_str(path=path)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        node = self.nodes.get(path)
        if node is None:
            return self._fail(f"no such file or directory: {path}")
        if node["type"] != "dir":
            return self._fail(f"not a directory: {path}")
        if not self._can(node, "r"):
            return self._fail(f"permission denied: {self.current_user} cannot read {path}")
        entries = []
        for p, n in self.nodes.items():
            if p != "/" and self._parent(p) == path:
                entry = {"name": p.rsplit("/", 1)[1], "type": n["type"], "owner": n["owner"],
                         "mode": n["mode"], "modified": n["modified"]}
                if n["type"] == "file":
                    entry["size"] = n["size"]
                entries.append(entry)
        entries.sort(key=lambda e: e["name"])
        return {"success": True, "data": {"path": path, "entries": entries}}

    def read_file(self, path: str) -> dict:
        """Return the text content and metadata of a file.

        Args:
            path: Absolute file path, e.g. "/home/alice/notes/todo.md".
        Rules: needs read permission on the file; binary files (no stored text) cannot be
        displayed.
        """
        err = self._require_str(path=path)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        node = self.nodes.get(path)
        if node is None:
            return self._fail(f"no such file or directory: {path}")
        if node["type"] != "file":
            return self._fail(f"is a directory: {path}")
        if not self._can(node, "r"):
            return self._fail(f"permission denied: {self.current_user} cannot read {path}")
        if node.get("content") is None:
            return self._fail(f"{path} is a binary file ({node.get('mime_type')}) and cannot be displayed")
        return {"success": True, "data": {"path": path, "size": node["size"], "owner": node["owner"],
                                          "mime_type": node["mime_type"], "content": node["content"]}}

    def disk_usage(self) -> dict:
        """Report the current user's quota, bytes used and bytes still available.

        Bytes used include files the user owns that are sitting in the trash.
        """
        err = self._session()
        if err:
            return self._fail(err)
        u = self._user()
        in_trash = 0
        for entry in self.trash.values():
            for n in entry["nodes"].values():
                if n["type"] == "file" and n["owner"] == self.current_user:
                    in_trash += n["size"]
        return {"success": True, "data": {"user": self.current_user, "quota_bytes": u["quota_bytes"],
                                          "used_bytes": u["used_bytes"], "in_trash_bytes": in_trash,
                                          "available_bytes": u["quota_bytes"] - u["used_bytes"]}}

    def list_trash(self) -> dict:
        """List trash entries visible to the current user.

        Regular users see the entries they deleted or whose top-level item they own;
        administrators see every entry.
        """
        err = self._session()
        if err:
            return self._fail(err)
        admin = self._user().get("is_admin")
        out = []
        for tid in sorted(self.trash):
            e = self.trash[tid]
            if admin or e["deleted_by"] == self.current_user or e["owner"] == self.current_user:
                out.append({"trash_id": tid, "original_path": e["original_path"], "owner": e["owner"],
                            "deleted_by": e["deleted_by"], "deleted_at": e["deleted_at"],
                            "size_bytes": e["size_bytes"], "items": len(e["nodes"])})
        return {"success": True, "data": out}

    # ------------------------------------------------------------------ updates

    def switch_user(self, username: str) -> dict:
        """Make another existing account the session's current user.

        Args:
            username: Account name, e.g. "bob". Disabled accounts cannot be used.
        """
        err = self._require_str(username=username)
        if err:
            return err
        if not isinstance(username, str) or username not in self.users:
            return self._fail(f"unknown user: {username}")
        if self.users[username].get("disabled"):
            return self._fail(f"account {username} is disabled")
        if username == self.current_user:
            return self._fail(f"{username} is already the current user")
        self.current_user = username
        return {"success": True, "message": f"Now acting as {username}"}

    def make_directory(self, path: str) -> dict:
        """Create a new empty directory owned by the current user.

        Args:
            path: Absolute path of the new directory; its parent must exist.
        Rules: needs write permission on the parent directory; the path must be free. The new
        directory gets mode rwxr-x--- and the user's primary group.
        """
        err = self._require_str(path=path)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        if path in self.nodes:
            return self._fail(f"already exists: {path}")
        parent = self._parent(path)
        pnode = self.nodes.get(parent)
        if pnode is None:
            return self._fail(f"parent directory does not exist: {parent}")
        if pnode["type"] != "dir":
            return self._fail(f"parent is not a directory: {parent}")
        if not self._can(pnode, "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {parent}")
        u = self._user()
        self.nodes[path] = {"type": "dir", "owner": self.current_user, "group": u["groups"][0],
                            "mode": "rwxr-x---", "modified": self._now()}
        return {"success": True, "message": f"Created directory {path}"}

    def write_file(self, path: str, content: str) -> dict:
        """Create a text file or overwrite an existing one.

        Args:
            path: Absolute file path.
            content: Full new text content (UTF-8); size is its encoded length.
        Rules: a new file needs write permission on the parent directory and is owned by the
        current user (mode rw-r-----); an existing file needs write permission on the file and
        keeps its owner. The size difference is charged to the file owner's quota and must fit.
        """
        err = self._require_str(path=path, content=content)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        if not isinstance(content, str):
            return self._fail("content must be a string")
        new_size = self._text_size(content)
        node = self.nodes.get(path)
        if node is not None:
            if node["type"] != "file":
                return self._fail(f"is a directory: {path}")
            if not self._can(node, "w"):
                return self._fail(f"permission denied: {self.current_user} cannot write {path}")
            if node.get("content") is None:
                return self._fail(f"{path} is a binary file and cannot be overwritten with text")
            grow = new_size - node["size"]
            if grow > self._free(node["owner"]):
                return self._fail(f"quota exceeded for {node['owner']}: needs {grow} more bytes, "
                                  f"{self._free(node['owner'])} available")
            node["content"] = content
            node["size"] = new_size
            node["modified"] = self._now()
            self.users[node["owner"]]["used_bytes"] += grow
            return {"success": True, "message": f"Overwrote {path}", "size": new_size}
        parent = self._parent(path)
        pnode = self.nodes.get(parent)
        if pnode is None:
            return self._fail(f"parent directory does not exist: {parent}")
        if pnode["type"] != "dir":
            return self._fail(f"parent is not a directory: {parent}")
        if not self._can(pnode, "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {parent}")
        if new_size > self._free(self.current_user):
            return self._fail(f"quota exceeded for {self.current_user}: needs {new_size} bytes, "
                              f"{self._free(self.current_user)} available")
        u = self._user()
        mime = "text/markdown" if path.endswith(".md") else "text/plain"
        self.nodes[path] = {"type": "file", "owner": self.current_user, "group": u["groups"][0],
                            "mode": "rw-r-----", "size": new_size, "mime_type": mime,
                            "content": content, "modified": self._now()}
        u["used_bytes"] += new_size
        return {"success": True, "message": f"Created {path}", "size": new_size}

    def change_mode(self, path: str, mode: str) -> dict:
        """Change the permission bits of a file or directory.

        Args:
            path: Absolute path.
            mode: Nine-character symbolic mode such as "rw-r-----" or "rwxr-x---".
        Rules: only the owner or an administrator may change the mode.
        """
        err = self._require_str(path=path, mode=mode)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        if not isinstance(mode, str) or len(mode) != 9 or any(
                c not in (_MODE_CHARS[i], "-") for i, c in enumerate(mode)):
            return self._fail(f"invalid mode '{mode}': expected 9 characters like rwxr-x---")
        node = self.nodes.get(path)
        if node is None:
            return self._fail(f"no such file or directory: {path}")
        if node["owner"] != self.current_user and not self._user().get("is_admin"):
            return self._fail(f"permission denied: only the owner ({node['owner']}) or an admin can chmod {path}")
        if node["mode"] == mode:
            return self._fail(f"{path} already has mode {mode}")
        node["mode"] = mode
        return {"success": True, "message": f"Mode of {path} set to {mode}"}

    def change_owner(self, path: str, new_owner: str) -> dict:
        """Give a file or directory (not its contents) to another user.

        Args:
            path: Absolute path.
            new_owner: Username of the new owner.
        Rules: administrators only; the new owner must be an enabled account. For a file the
        bytes move from the old owner's usage to the new owner's, and must fit in the new
        owner's quota. The group becomes the new owner's primary group.
        """
        err = self._require_str(path=path, new_owner=new_owner)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        if not self._user().get("is_admin"):
            return self._fail("permission denied: only administrators can change ownership")
        node = self.nodes.get(path)
        if node is None:
            return self._fail(f"no such file or directory: {path}")
        if not isinstance(new_owner, str) or new_owner not in self.users:
            return self._fail(f"unknown user: {new_owner}")
        if self.users[new_owner].get("disabled"):
            return self._fail(f"account {new_owner} is disabled and cannot own files")
        if node["owner"] == new_owner:
            return self._fail(f"{path} is already owned by {new_owner}")
        old = node["owner"]
        if node["type"] == "file":
            if node["size"] > self._free(new_owner):
                return self._fail(f"quota exceeded for {new_owner}: needs {node['size']} bytes, "
                                  f"{self._free(new_owner)} available")
            self.users[old]["used_bytes"] -= node["size"]
            self.users[new_owner]["used_bytes"] += node["size"]
        node["owner"] = new_owner
        node["group"] = self.users[new_owner]["groups"][0]
        return {"success": True, "message": f"{path} now owned by {new_owner} (was {old})"}

    def move(self, source: str, destination: str) -> dict:
        """Move or rename a file or a whole directory tree.

        Args:
            source: Existing absolute path.
            destination: New absolute path (must not exist; its parent must be a directory).
        Rules: needs write permission on both the source's parent and the destination's parent;
        a directory cannot be moved into itself or its own subtree; the root, top-level
        directories and home directories cannot be moved.
        Ownership, modes and timestamps are preserved; quotas are unaffected.
        """
        err = self._require_str(source=source, destination=destination)
        if err:
            return err
        err = self._session() or self._check_path(source) or self._check_path(destination)
        if err:
            return self._fail(err)
        if self._protected(source):
            return self._fail(f"{source} is protected and cannot be moved")
        if source not in self.nodes:
            return self._fail(f"no such file or directory: {source}")
        if destination in self.nodes:
            return self._fail(f"destination already exists: {destination}")
        if self._is_under(destination, source):
            return self._fail(f"cannot move {source} into its own subtree")
        sparent, dparent = self._parent(source), self._parent(destination)
        dnode = self.nodes.get(dparent)
        if dnode is None or dnode["type"] != "dir":
            return self._fail(f"destination parent is not an existing directory: {dparent}")
        if not self._can(self.nodes[sparent], "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {sparent}")
        if not self._can(dnode, "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {dparent}")
        paths = self._subtree(source)
        moved = {p: self.nodes.pop(p) for p in paths}
        for p, n in moved.items():
            self.nodes[destination + p[len(source):]] = n
        return {"success": True, "message": f"Moved {source} to {destination}", "items_moved": len(paths)}

    def copy(self, source: str, destination: str) -> dict:
        """Copy a file or directory tree; the copies belong to the current user.

        Args:
            source: Existing absolute path.
            destination: New absolute path (must not exist; its parent must be a directory).
        Rules: needs read permission on every copied item and write permission on the
        destination's parent; the total size of copied files is charged to the current user and
        must fit in the quota. Copies keep modes and get the user's primary group.
        """
        err = self._require_str(source=source, destination=destination)
        if err:
            return err
        err = self._session() or self._check_path(source) or self._check_path(destination)
        if err:
            return self._fail(err)
        if source not in self.nodes:
            return self._fail(f"no such file or directory: {source}")
        if destination in self.nodes:
            return self._fail(f"destination already exists: {destination}")
        if self._is_under(destination, source) or destination == source:
            return self._fail(f"cannot copy {source} into itself")
        dparent = self._parent(destination)
        dnode = self.nodes.get(dparent)
        if dnode is None or dnode["type"] != "dir":
            return self._fail(f"destination parent is not an existing directory: {dparent}")
        if not self._can(dnode, "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {dparent}")
        paths = self._subtree(source)
        total = 0
        for p in paths:
            if not self._can(self.nodes[p], "r"):
                return self._fail(f"permission denied: {self.current_user} cannot read {p}")
            if self.nodes[p]["type"] == "file":
                total += self.nodes[p]["size"]
        if total > self._free(self.current_user):
            return self._fail(f"quota exceeded for {self.current_user}: needs {total} bytes, "
                              f"{self._free(self.current_user)} available")
        now = self._now()
        group = self._user()["groups"][0]
        for p in paths:
            n = dict(self.nodes[p])
            n["owner"] = self.current_user
            n["group"] = group
            n["modified"] = now
            self.nodes[destination + p[len(source):]] = n
        self._user()["used_bytes"] += total
        return {"success": True, "message": f"Copied {source} to {destination}",
                "items_copied": len(paths), "bytes_charged": total}

    def delete(self, path: str) -> dict:
        """Move a file or directory tree to the trash.

        Args:
            path: Absolute path to delete.
        Rules: needs write permission on the parent and, for a directory, on every directory
        inside it. The root, top-level directories (/home, /shared, ...) and home directories
        (/home/<user>) cannot be deleted. Trashed
        files still count against their owners' quotas until the trash is emptied. Returns the
        trash id needed to restore.
        """
        err = self._require_str(path=path)
        if err:
            return err
        err = self._session() or self._check_path(path)
        if err:
            return self._fail(err)
        if self._protected(path):
            return self._fail(f"{path} is protected and cannot be deleted")
        if path not in self.nodes:
            return self._fail(f"no such file or directory: {path}")
        parent = self._parent(path)
        if not self._can(self.nodes[parent], "w"):
            return self._fail(f"permission denied: {self.current_user} cannot write to {parent}")
        paths = self._subtree(path)
        for p in paths[1:]:
            if self.nodes[p]["type"] == "dir" and not self._can(self.nodes[p], "w"):
                return self._fail(f"permission denied: {self.current_user} cannot remove entries of {p}")
        if self.nodes[path]["type"] == "dir" and not self._can(self.nodes[path], "w"):
            return self._fail(f"permission denied: {self.current_user} cannot remove entries of {path}")
        self.trash_seq += 1
        tid = f"TR-{self.trash_seq:04d}"
        removed = {p: self.nodes.pop(p) for p in paths}
        size = sum(n["size"] for n in removed.values() if n["type"] == "file")
        self.trash[tid] = {"original_path": path, "owner": removed[path]["owner"],
                           "deleted_by": self.current_user, "deleted_at": self._now(),
                           "size_bytes": size, "nodes": removed}
        return {"success": True, "message": f"Moved {path} to trash", "trash_id": tid,
                "items": len(paths), "size_bytes": size}

    def restore(self, trash_id: str) -> dict:
        """Put a trashed item back at its original path.

        Args:
            trash_id: Trash entry id, e.g. "TR-0004".
        Rules: only the user who deleted it, the owner of the top-level item or an
        administrator may restore; the original parent directory must exist and the original
        path must be free.
        """
        err = self._require_str(trash_id=trash_id)
        if err:
            return err
        err = self._session()
        if err:
            return self._fail(err)
        entry = self.trash.get(trash_id)
        if entry is None:
            return self._fail(f"no trash entry {trash_id}")
        if not (self._user().get("is_admin") or self.current_user in (entry["deleted_by"], entry["owner"])):
            return self._fail(f"permission denied: {self.current_user} cannot restore {trash_id}")
        path = entry["original_path"]
        if path in self.nodes:
            return self._fail(f"cannot restore: {path} already exists")
        parent = self._parent(path)
        if parent not in self.nodes or self.nodes[parent]["type"] != "dir":
            return self._fail(f"cannot restore: parent directory {parent} no longer exists")
        for p, n in entry["nodes"].items():
            self.nodes[p] = n
        del self.trash[trash_id]
        return {"success": True, "message": f"Restored {path}", "items": len(entry["nodes"])}

    def empty_trash(self) -> dict:
        """Permanently delete the trash entries the current user deleted, freeing quota.

        Administrators empty the whole trash. Each purged file's size is released from its
        owner's used bytes.
        """
        err = self._session()
        if err:
            return self._fail(err)
        admin = self._user().get("is_admin")
        ids = [t for t in sorted(self.trash) if admin or self.trash[t]["deleted_by"] == self.current_user]
        if not ids:
            return self._fail("trash is already empty")
        freed = 0
        for tid in ids:
            for n in self.trash[tid]["nodes"].values():
                if n["type"] == "file" and n["owner"] in self.users:
                    self.users[n["owner"]]["used_bytes"] -= n["size"]
                    freed += n["size"]
            del self.trash[tid]
        return {"success": True, "message": f"Permanently deleted {len(ids)} trash entries",
                "entries_purged": ids, "bytes_freed": freed}
