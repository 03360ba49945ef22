"""A small multipart/form-data parser for file uploads.

Starlette's own form parsing needs the python-multipart package, which the project does not
depend on; uploads here are whole JSONL files already read into memory, so splitting on the
boundary is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser


@dataclass(frozen=True)
class FormFile:
    filename: str
    data: bytes


def parse_form(content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, FormFile]]:
    """(text fields, file fields) of a multipart/form-data body; ValueError when malformed."""
    header = Message()
    header["content-type"] = content_type
    boundary = header.get_boundary()
    if header.get_content_type() != "multipart/form-data" or not boundary:
        raise ValueError("expected multipart/form-data with a boundary")
    delimiter = b"--" + boundary.encode("latin-1")
    chunks = body.split(delimiter)
    if len(chunks) < 3 or not chunks[-1].startswith(b"--"):
        raise ValueError("multipart body is not terminated by its closing boundary")
    fields: dict[str, str] = {}
    files: dict[str, FormFile] = {}
    for chunk in chunks[1:-1]:
        head, separator, content = chunk.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not separator:
            raise ValueError("multipart part has no header block")
        content = content.removesuffix(b"\r\n")
        part = HeaderParser().parsestr(head.decode("utf-8", "surrogateescape"))
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            raise ValueError("multipart part has no field name")
        filename = part.get_filename()
        if filename is None:
            fields[name] = content.decode("utf-8")
        else:
            files[name] = FormFile(filename, content)
    return fields, files
