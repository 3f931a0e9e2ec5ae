"""Turn off a veth's checksum and segmentation offloads, as `ethtool -K IF tx off
tso off gso off gro off` would (no ethtool binary here; the legacy SIOCETHTOOL
ioctls do the same).

Why: with offloads on, a veth hands its peer frames whose TCP checksum is left
to "hardware" and segments of up to 64 KB. The packet wire reads those frames
raw and writes them out of another veth, where they arrive as ordinary frames:
the receiver checks the (never computed) checksum and drops them. With offloads
off, every frame on the wire is a finished, MTU-sized Ethernet frame.

Usage, inside the namespace that holds the interfaces:
    python offloads.py IFNAME [IFNAME ...]
"""

from __future__ import annotations

import ctypes
import fcntl
import socket
import struct
import sys

SIOCETHTOOL = 0x8946
ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SGRO = 0x17, 0x1F, 0x24, 0x2C


def set_feature(ifname: str, command: int, value: int) -> None:
    value_buf = ctypes.create_string_buffer(struct.pack("II", command, value))
    ifreq = struct.pack("16sP", ifname.encode(), ctypes.addressof(value_buf)).ljust(40, b"\0")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)


def offloads_off(ifname: str) -> None:
    for command in (ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SGRO):
        set_feature(ifname, command, 0)


if __name__ == "__main__":
    for name in sys.argv[1:]:
        offloads_off(name)
