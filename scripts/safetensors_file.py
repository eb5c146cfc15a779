"""Writing a safetensors file from tensors already encoded as bytes (the fixture generators' common layout)."""

import json
import struct


def write_safetensors_file(path, entries):
    """Writes entries {name: (dtype, shape, data bytes)} to path: data in name order, the header's keys in that order
    with "__metadata__" last, the header padded with spaces to a multiple of 8 bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(entries):
        dtype, shape, data = entries[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
