"""A skill folder as published (Agent Skills format): SKILL.md plus the files beside it.

Two ways in: a `.zip` of the folder (SKILL.md at the root of the archive or inside one top
folder, as `anthropics/skills` and Claude's "upload skill" use), or JSON `{document, files}`.
Either way every path is checked (no absolute paths, `..`, backslashes or links), and the
folder is bounded in files and bytes; an archive is read with a hard cap on what it expands
to, so a zip bomb is refused after reading at most the limit, never inflated.
"""

from __future__ import annotations

import io
import mimetypes
import posixpath
import stat
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.errors import Invalid, PayloadTooLarge

MAX_FILES = 200
"""Files besides SKILL.md (Anthropic's largest public skill has about 80)."""
MAX_FILE_BYTES = 2_000_000
MAX_FOLDER_BYTES = 8_000_000
"""What a whole folder may expand to (under the request body limit's default)."""
MAX_ARCHIVE_ENTRIES = 1000
"""Entries an archive may list at all (directories and ignored files included)."""
MAX_PATH_CHARS = 512
SKILL_MD = "SKILL.md"
_IGNORED_PARTS = frozenset({"__MACOSX", ".DS_Store", ".git"})
_SCRIPT_SUFFIXES = frozenset(
    {".py", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".ps1", ".bat"}
)
_MEDIA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".py": "text/x-python",
    ".sh": "text/x-shellscript",
    ".ts": "text/x-typescript",
    ".xsd": "application/xml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
}


@dataclass(frozen=True, kw_only=True)
class FolderFile:
    path: str
    size: int
    media_type: str
    text: str | None
    data: bytes | None

    @property
    def script(self) -> bool:
        return is_script(self.path)

    def info(self) -> dict[str, Any]:
        """The entry of the skill's file index (what lists show; no content)."""
        return {
            "path": self.path,
            "size": self.size,
            "media_type": self.media_type,
            "script": self.script,
            "text": self.text is not None,
        }


@dataclass(frozen=True, kw_only=True)
class Folder:
    document: str
    """The SKILL.md text."""
    files: list[FolderFile] | None
    """The other files in path order; None: not given (a re-import keeps the stored ones)."""


def is_script(path: str) -> bool:
    return path.split("/", 1)[0] == "scripts" or posixpath.splitext(path)[1] in _SCRIPT_SUFFIXES


def clean_path(raw: str, *, field: str = "files") -> str:
    """A relative POSIX path inside the folder, or a 422 naming it."""
    shown = raw[:80]
    if not raw or len(raw) > MAX_PATH_CHARS:
        raise Invalid(f"{field}: path {shown!r} must be 1-{MAX_PATH_CHARS} characters")
    if "\\" in raw or "\x00" in raw or any(ord(c) < 32 for c in raw):
        raise Invalid(f"{field}: path {shown!r} may not contain backslashes or control characters")
    if raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise Invalid(f"{field}: path {shown!r} must be relative to the skill's folder")
    parts = raw.removeprefix("./").split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise Invalid(
            f"{field}: path {shown!r} may not contain empty, '.' or '..' segments "
            "(files stay inside the skill's folder)"
        )
    return "/".join(parts)


def media_type(path: str, *, text: bool) -> str:
    suffix = posixpath.splitext(path)[1].lower()
    guessed = _MEDIA_TYPES.get(suffix) or mimetypes.guess_type(path, strict=False)[0]
    return guessed or ("text/plain" if text else "application/octet-stream")


def folder_file(path: str, raw: bytes) -> FolderFile:
    """Text when it is UTF-8 without NUL bytes, else kept as bytes."""
    text: str | None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and "\x00" in text:
        text = None
    return FolderFile(
        path=path,
        size=len(raw),
        media_type=media_type(path, text=text is not None),
        text=text,
        data=None if text is not None else raw,
    )


def _check_totals(files: list[FolderFile]) -> None:
    if len(files) > MAX_FILES:
        raise PayloadTooLarge(
            f"files: {len(files)} files; a skill folder holds at most {MAX_FILES}"
        )
    total = sum(f.size for f in files)
    if total > MAX_FOLDER_BYTES:
        raise PayloadTooLarge(
            f"files: {total} bytes in all; a skill folder holds at most {MAX_FOLDER_BYTES}"
        )


def from_json(document: str, files: Mapping[str, str] | None) -> Folder:
    """`{document, files: {"<path>": "<text>"}}`."""
    if files is None:
        return Folder(document=document, files=None)
    out: dict[str, FolderFile] = {}
    for raw_path, text in files.items():
        path = clean_path(raw_path)
        if path == SKILL_MD:
            raise Invalid("files: SKILL.md is the document; send it as 'document'")
        if path in out:
            raise Invalid(f"files: {path!r} is given twice")
        encoded = text.encode("utf-8")
        if len(encoded) > MAX_FILE_BYTES:
            raise PayloadTooLarge(
                f"files: {path!r} is {len(encoded)} bytes; a file may hold {MAX_FILE_BYTES}"
            )
        out[path] = folder_file(path, encoded)
        _check_totals(list(out.values()))
    return Folder(document=document, files=sorted(out.values(), key=lambda f: f.path))


def from_zip(raw: bytes) -> Folder:
    """A `.zip` of a skill folder; 413 for a folder over the limits, 422 for anything else."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(raw))
    except (zipfile.BadZipFile, ValueError, EOFError) as exc:
        raise Invalid(f"file: not a zip archive ({exc})") from exc
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_ARCHIVE_ENTRIES:
            raise PayloadTooLarge(
                f"file: the archive lists {len(infos)} entries; at most {MAX_ARCHIVE_ENTRIES}"
            )
        members = [i for i in infos if not i.is_dir() and not _ignored(i.filename)]
        prefix = _root(members)
        document: str | None = None
        files: dict[str, FolderFile] = {}
        expanded = 0
        for info in members:
            if stat.S_ISLNK(info.external_attr >> 16):
                raise Invalid(f"file: {info.filename[:80]!r} is a symbolic link; links are refused")
            path = clean_path(info.filename.removeprefix(prefix), field="file")
            if info.file_size > MAX_FILE_BYTES:
                raise PayloadTooLarge(
                    f"file: {path!r} expands to {info.file_size} bytes; "
                    f"a file may hold {MAX_FILE_BYTES}"
                )
            data = _read_member(archive, info, path, room=MAX_FOLDER_BYTES - expanded)
            expanded += len(data)
            if path == SKILL_MD:
                document = _skill_md(data)
            elif path in files:
                raise Invalid(f"file: {path!r} is in the archive twice")
            else:
                files[path] = folder_file(path, data)
        if document is None:
            raise Invalid("file: the archive has no SKILL.md at its root or inside one top folder")
        listed = sorted(files.values(), key=lambda f: f.path)
        _check_totals(listed)
        return Folder(document=document, files=listed)


def _ignored(name: str) -> bool:
    return any(part in _IGNORED_PARTS for part in name.split("/"))


def _root(members: list[zipfile.ZipInfo]) -> str:
    """`""` when SKILL.md is at the archive's root, `"<folder>/"` when every file is in
    one top folder that holds it."""
    names = [m.filename for m in members]
    if SKILL_MD in names:
        return ""
    tops = {name.split("/", 1)[0] for name in names}
    if len(tops) == 1 and all("/" in name for name in names):
        return f"{next(iter(tops))}/"
    return ""


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path: str, *, room: int) -> bytes:
    """The member's bytes, reading at most one byte past what may still be stored: the
    declared sizes of an archive can lie, the cap cannot."""
    cap = min(MAX_FILE_BYTES, max(room, 0))
    try:
        with archive.open(info) as member:
            data = member.read(cap + 1)
    except RuntimeError as exc:  # encrypted member
        raise Invalid(f"file: {path!r} cannot be read ({exc})") from exc
    except (zipfile.BadZipFile, NotImplementedError, EOFError, zlib.error, OSError) as exc:
        raise Invalid(
            f"file: {path!r} is damaged or uses an unsupported compression ({exc})"
        ) from exc
    if len(data) > cap:
        limit = MAX_FILE_BYTES if cap == MAX_FILE_BYTES else MAX_FOLDER_BYTES
        raise PayloadTooLarge(
            f"file: the archive expands beyond {limit} bytes at {path!r} "
            "(refused without inflating the rest)"
        )
    return data


def _skill_md(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Invalid("file: SKILL.md is not UTF-8 text") from exc
