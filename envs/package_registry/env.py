"""A language package registry (npm/PyPI style): packages with maintainers, immutable semver
versions, dist-tags, yanking, deprecation, download counters and dependency resolution.

Version keys are "<package>@<version>". Dependency ranges support exact versions, caret (^),
tilde (~), >= and *; pre-releases only match exact ranges.
"""

import datetime
import re


_SEMVER = re.compile(r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?")
_TAG = re.compile(r"[a-z][a-z0-9-]{0,31}")
MAX_SIZE_KB = 50000


class PackageRegistry:
    """Users, packages, versions, dist-tags, yanks, deprecations and downloads."""

    def __init__(self, init_config: dict):
        self.users = {}
        self.packages = {}
        self.versions = {}

    # ------------------------------------------------------------------ semver helpers

    @staticmethod
    def _parse(v):
        """Return a sortable key for a semver string, or None if invalid."""
        if not isinstance(v, str):
            return None
        m = _SEMVER.fullmatch(v)
        if not m:
            return None
        major, minor, patch, pre = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        if pre is None:
            return (major, minor, patch, 1, ())
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
        return (major, minor, patch, 0, ids)

    def _range(self, spec):
        """Return a predicate for a range spec, or None if the spec is invalid."""
        if not isinstance(spec, str):
            return None
        spec = spec.strip()
        if spec == "*":
            return lambda k: k[3] == 1
        for prefix in ("^", "~", ">="):
            if spec.startswith(prefix):
                base = self._parse(spec[len(prefix):])
                if base is None or base[3] == 0:
                    return None
                lo = base
                if prefix == ">=":
                    return lambda k: k[3] == 1 and k >= lo
                if prefix == "~":
                    hi = (base[0], base[1] + 1, 0, 0, ())
                elif base[0] > 0:
                    hi = (base[0] + 1, 0, 0, 0, ())
                elif base[1] > 0:
                    hi = (0, base[1] + 1, 0, 0, ())
                else:
                    hi = (0, 0, base[2] + 1, 0, ())
                return lambda k: k[3] == 1 and lo <= k < hi
        exact = self._parse(spec)
        if exact is None:
            return None
        return lambda k: k == exact

    def _pkg_versions(self, name):
        """(key, version string, record) for all versions of a package, ascending."""
        rows = [(self._parse(v["version"]), v["version"], v) for v in self.versions.values() if v["package"] == name]
        rows.sort(key=lambda r: r[0])
        return rows

    def _resolve(self, name, spec):
        pred = self._range(spec)
        if pred is None:
            return None, f"invalid version range '{spec}'"
        best = None
        for key, ver, rec in self._pkg_versions(name):
            if not rec["yanked"] and pred(key):
                best = ver
        return best, None

    def _highest_stable(self, name):
        best = None
        for key, ver, rec in self._pkg_versions(name):
            if not rec["yanked"] and key[3] == 1:
                best = ver
        return best

    # ------------------------------------------------------------------ other helpers

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

    def _package(self, name):
        p = self.packages.get(name) if isinstance(name, str) else None
        if p is None:
            return None, self._fail(f"package {name} not found")
        return p, None

    def _actor(self, p, name, actor, need_owner=False):
        u = self.users.get(actor) if isinstance(actor, str) else None
        if u is None:
            return self._fail(f"user {actor} not found")
        if u["status"] != "active":
            return self._fail(f"user {actor} is {u['status']}")
        role = p["maintainers"].get(actor)
        if role is None:
            return self._fail(f"{actor} is not a maintainer of {name}")
        if need_owner and role != "owner":
            return self._fail(f"only owners of {name} can do this; {actor} is a {role}")
        if p["require_2fa"] and not u["two_factor"]:
            return self._fail(f"{name} requires two-factor authentication; {actor} has not enabled it")
        return None

    # ------------------------------------------------------------------ queries

    def get_package(self, name: str) -> dict:
        """Return a package's metadata, maintainers, dist-tags and the packages depending on it.

        Args:
            name: Package name, e.g. "fastjsonx".
        Dependents are packages whose "latest" version lists this package as a dependency.
        """
        err = self._require_str(name=name)
        if err:
            return err
        p, err = self._package(name)
        if err:
            return err
        dependents = []
        for other, op in sorted(self.packages.items()):
            latest = op["dist_tags"].get("latest")
            if latest and name in self.versions.get(f"{other}@{latest}", {}).get("dependencies", {}):
                dependents.append(other)
        data = dict(p)
        data["name"] = name
        data["version_count"] = len(self._pkg_versions(name))
        data["dependents"] = dependents
        return {"success": True, "data": data}

    def list_versions(self, name: str) -> dict:
        """List all versions of a package in semver order with yank state and downloads.

        Args:
            name: Package name.
        """
        err = self._require_str(name=name)
        if err:
            return err
        p, err = self._package(name)
        if err:
            return err
        rows = [{"version": ver, "published_at": rec["published_at"], "yanked": rec["yanked"],
                 "downloads": rec["downloads"], "dependencies": rec["dependencies"]}
                for _, ver, rec in self._pkg_versions(name)]
        return {"success": True, "data": {"name": name, "dist_tags": p["dist_tags"], "versions": rows}}

    def resolve_version(self, name: str, version_range: str) -> dict:
        """Find the highest non-yanked version of a package that satisfies a range.

        Args:
            name: Package name.
            version_range: "1.4.2", "^1.4.0", "~1.4.0", ">=2.0.0" or "*".
        """
        err = self._require_str(name=name, version_range=version_range)
        if err:
            return err
        p, err = self._package(name)
        if err:
            return err
        best, err = self._resolve(name, version_range)
        if err:
            return self._fail(err)
        if best is None:
            return self._fail(f"no non-yanked version of {name} satisfies {version_range}")
        return {"success": True, "data": {"name": name, "range": version_range, "version": best,
                                          "deprecated": self.versions[f"{name}@{best}"]["deprecated"]}}

    def get_user_packages(self, username: str) -> dict:
        """List the packages a user maintains, with their role in each.

        Args:
            username: Registry username.
        """
        err = self._require_str(username=username)
        if err:
            return err
        u = self.users.get(username)
        if u is None:
            return self._fail(f"user {username} not found")
        rows = [{"name": n, "role": p["maintainers"][username], "latest": p["dist_tags"].get("latest"),
                 "deprecated": p["deprecated"] is not None}
                for n, p in sorted(self.packages.items()) if username in p["maintainers"]]
        return {"success": True, "data": {"username": username, "status": u["status"],
                                          "two_factor": u["two_factor"], "packages": rows}}

    def top_packages(self) -> dict:
        """List the ten most downloaded packages (all-time) with their latest version."""
        rows = sorted(self.packages.items(), key=lambda kv: (-kv[1]["downloads_total"], kv[0]))[:10]
        return {"success": True, "data": [{"name": n, "downloads_total": p["downloads_total"],
                                           "latest": p["dist_tags"].get("latest"),
                                           "deprecated": p["deprecated"] is not None} for n, p in rows]}

    # ------------------------------------------------------------------ updates

    def publish_version(self, package: str, version: str, publisher: str, dependencies: dict | None = None,
                        size_kb: int = 100, tag: str = "latest") -> dict:
        """Publish a new immutable version of a package.

        Args:
            package: Existing package name.
            version: Semver "MAJOR.MINOR.PATCH" with optional "-prerelease".
            publisher: A maintainer with a verified email (and 2FA if the package requires it).
            dependencies: Map of package name to version range, e.g. {"tinyparse": "^1.2.0"}.
            size_kb: Tarball size, 1-50000.
            tag: Dist-tag to point at the new version (default "latest").
        Rules: deprecated packages do not accept new versions; a version number can never be
        reused, even after yanking; it must be higher than every existing version with the same
        major number; pre-releases cannot be tagged latest and latest can never move to a lower
        version; every dependency must exist, not be the package itself, and its range must
        resolve to a non-yanked version.
        """
        err = self._require_str(package=package, version=version, publisher=publisher, tag=tag)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, publisher)
        if err:
            return err
        if not self.users[publisher]["email_verified"]:
            return self._fail(f"{publisher} must verify their email address before publishing")
        if p["deprecated"] is not None:
            return self._fail(f"{package} is deprecated and does not accept new versions")
        key = self._parse(version)
        if key is None:
            return self._fail(f"'{version}' is not a valid semantic version")
        vid = f"{package}@{version}"
        if vid in self.versions:
            state = "yanked" if self.versions[vid]["yanked"] else "published"
            return self._fail(f"{vid} was already {state}; version numbers cannot be reused")
        same_major = [k for k, _, _ in self._pkg_versions(package) if k[0] == key[0]]
        if same_major and key < max(same_major):
            return self._fail(f"{version} is lower than an existing {key[0]}.x version of {package}")
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            return self._fail(f"invalid dist-tag '{tag}'")
        if tag == "latest":
            if key[3] == 0:
                return self._fail("pre-release versions cannot be tagged latest")
            cur = p["dist_tags"].get("latest")
            if cur and key < self._parse(cur):
                return self._fail(f"latest is {cur}; tag older-line releases with another tag (e.g. v{key[0]}-lts)")
        if not isinstance(size_kb, int) or isinstance(size_kb, bool) or not (1 <= size_kb <= MAX_SIZE_KB):
            return self._fail(f"size_kb must be an integer from 1 to {MAX_SIZE_KB}")
        deps = {} if dependencies is None else dependencies
        if not isinstance(deps, dict):
            return self._fail("dependencies must be an object mapping package names to ranges")
        for dep, spec in deps.items():
            if dep == package:
                return self._fail(f"{package} cannot depend on itself")
            if dep not in self.packages:
                return self._fail(f"dependency {dep} does not exist")
            best, err = self._resolve(dep, spec)
            if err:
                return self._fail(f"dependency {dep}: {err}")
            if best is None:
                return self._fail(f"dependency {dep}@{spec} matches no available version")
        self.versions[vid] = {"package": package, "version": version, "published_by": publisher,
                              "published_at": datetime.datetime.now().replace(microsecond=0).isoformat(),
                              "yanked": False, "yank_reason": None, "deprecated": None,
                              "dependencies": dict(sorted(deps.items())), "downloads": 0, "size_kb": size_kb}
        p["dist_tags"][tag] = version
        return {"success": True, "message": f"Published {vid} with tag {tag}"}

    def yank_version(self, package: str, version: str, actor: str, reason: str) -> dict:
        """Yank a version so that ranges no longer resolve to it (it stays downloadable when pinned).

        Args:
            package: Package name.
            version: Version to yank.
            actor: A maintainer of the package.
            reason: Why it is yanked, at least 10 characters.
        Effects: if "latest" pointed at it, latest moves to the highest remaining non-yanked
        stable version (or is removed if none); other dist-tags pointing at it are removed.
        Reports dependents whose latest version can no longer resolve this package.
        """
        err = self._require_str(package=package, version=version, actor=actor, reason=reason)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor)
        if err:
            return err
        vid = f"{package}@{version}"
        rec = self.versions.get(vid)
        if rec is None:
            return self._fail(f"{vid} does not exist")
        if rec["yanked"]:
            return self._fail(f"{vid} is already yanked")
        if not isinstance(reason, str) or len(reason.strip()) < 10:
            return self._fail("a yank reason of at least 10 characters is required")
        rec["yanked"] = True
        rec["yank_reason"] = reason.strip()
        moved = {}
        for tag in sorted(p["dist_tags"]):
            if p["dist_tags"][tag] != version:
                continue
            if tag == "latest":
                nxt = self._highest_stable(package)
                if nxt:
                    p["dist_tags"]["latest"] = nxt
                    moved["latest"] = nxt
                    continue
            del p["dist_tags"][tag]
            moved[tag] = None
        broken = []
        for other, op in sorted(self.packages.items()):
            latest = op["dist_tags"].get("latest")
            spec = self.versions.get(f"{other}@{latest}", {}).get("dependencies", {}).get(package)
            if spec is not None and self._resolve(package, spec)[0] is None:
                broken.append(other)
        return {"success": True, "message": f"Yanked {vid}", "dist_tags_changed": moved, "broken_dependents": broken}

    def unyank_version(self, package: str, version: str, actor: str) -> dict:
        """Restore a yanked version (package owners only); dist-tags are not restored.

        Args:
            package: Package name.
            version: Yanked version.
            actor: An owner of the package.
        """
        err = self._require_str(package=package, version=version, actor=actor)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor, need_owner=True)
        if err:
            return err
        rec = self.versions.get(f"{package}@{version}")
        if rec is None:
            return self._fail(f"{package}@{version} does not exist")
        if not rec["yanked"]:
            return self._fail(f"{package}@{version} is not yanked")
        rec["yanked"] = False
        rec["yank_reason"] = None
        return {"success": True, "message": f"Restored {package}@{version}"}

    def set_dist_tag(self, package: str, actor: str, tag: str, version: str) -> dict:
        """Point a dist-tag (e.g. latest, next, beta, v1-lts) at an existing version.

        Args:
            package: Package name.
            actor: A maintainer.
            tag: Tag name: lowercase letter first, then letters, digits or hyphens (max 32).
            version: A non-yanked version of the package; latest cannot point at a pre-release.
        """
        err = self._require_str(package=package, actor=actor, tag=tag, version=version)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor)
        if err:
            return err
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            return self._fail(f"invalid dist-tag '{tag}'")
        rec = self.versions.get(f"{package}@{version}")
        if rec is None:
            return self._fail(f"{package}@{version} does not exist")
        if rec["yanked"]:
            return self._fail(f"{package}@{version} is yanked")
        if tag == "latest" and self._parse(version)[3] == 0:
            return self._fail("latest cannot point at a pre-release")
        if p["dist_tags"].get(tag) == version:
            return self._fail(f"{tag} already points at {version}")
        p["dist_tags"][tag] = version
        return {"success": True, "message": f"{package}@{tag} -> {version}"}

    def add_maintainer(self, package: str, actor: str, username: str, role: str) -> dict:
        """Add a maintainer or owner to a package, or change an existing maintainer's role (owners only).

        Args:
            package: Package name.
            actor: An owner of the package.
            username: Active user with a verified email.
            role: "owner" or "maintainer".
        """
        err = self._require_str(package=package, actor=actor, username=username, role=role)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor, need_owner=True)
        if err:
            return err
        if role not in ("owner", "maintainer"):
            return self._fail("role must be owner or maintainer")
        u = self.users.get(username)
        if u is None:
            return self._fail(f"user {username} not found")
        if u["status"] != "active" or not u["email_verified"]:
            return self._fail(f"{username} must be an active user with a verified email")
        if p["maintainers"].get(username) == role:
            return self._fail(f"{username} is already a {role} of {package}")
        if username == actor and role != "owner" and sum(r == "owner" for r in p["maintainers"].values()) == 1:
            return self._fail(f"{package} must keep at least one owner")
        p["maintainers"][username] = role
        article = "an owner" if role == "owner" else "a maintainer"
        return {"success": True, "message": f"{username} is now {article} of {package}"}

    def remove_maintainer(self, package: str, actor: str, username: str) -> dict:
        """Remove a maintainer from a package (owners only; the last owner cannot be removed).

        Args:
            package: Package name.
            actor: An owner of the package.
            username: Maintainer to remove.
        """
        err = self._require_str(package=package, actor=actor, username=username)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor, need_owner=True)
        if err:
            return err
        role = p["maintainers"].get(username)
        if role is None:
            return self._fail(f"{username} is not a maintainer of {package}")
        if role == "owner" and sum(r == "owner" for r in p["maintainers"].values()) == 1:
            return self._fail(f"{username} is the last owner of {package}")
        del p["maintainers"][username]
        return {"success": True, "message": f"{username} removed from {package}"}

    def record_downloads(self, package: str, version: str, count: int) -> dict:
        """Add a batch of downloads (from the CDN logs) to a version and its package.

        Args:
            package: Package name.
            version: Existing version (yanked versions still count when pinned).
            count: Number of downloads, 1-1000000.
        """
        err = self._require_str(package=package, version=version)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        rec = self.versions.get(f"{package}@{version}")
        if rec is None:
            return self._fail(f"{package}@{version} does not exist")
        if not isinstance(count, int) or isinstance(count, bool) or not (1 <= count <= 1000000):
            return self._fail("count must be an integer from 1 to 1000000")
        rec["downloads"] += count
        p["downloads_total"] += count
        return {"success": True, "message": f"Recorded {count} downloads of {package}@{version}",
                "version_downloads": rec["downloads"], "package_downloads": p["downloads_total"]}

    def deprecate_package(self, package: str, actor: str, message: str) -> dict:
        """Deprecate a whole package (owners only): the package and every non-yanked version carry the message.

        Args:
            package: Package name.
            actor: An owner of the package.
            message: Deprecation notice shown to installers, 10-300 characters (e.g. "use X instead").
        Rules: a deprecated package accepts no new versions.
        """
        err = self._require_str(package=package, actor=actor, message=message)
        if err:
            return err
        p, err = self._package(package)
        if err:
            return err
        err = self._actor(p, package, actor, need_owner=True)
        if err:
            return err
        if not isinstance(message, str) or not (10 <= len(message.strip()) <= 300):
            return self._fail("deprecation message must be 10 to 300 characters")
        if p["deprecated"] is not None:
            return self._fail(f"{package} is already deprecated")
        msg = message.strip()
        p["deprecated"] = msg
        marked = []
        for _, ver, rec in self._pkg_versions(package):
            if not rec["yanked"] and rec["deprecated"] != msg:
                rec["deprecated"] = msg
                marked.append(ver)
        return {"success": True, "message": f"{package} deprecated", "versions_marked": marked}
