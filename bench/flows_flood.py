#!/usr/bin/env python3
"""Flow-export helper for bench/flows.sh (loopback only).

  flows_flood.py count PCAP            datagrams in a pcap of export (one number)
  flows_flood.py flood PCAP PORT N K   sends the pcap's first K datagrams from each of N
                                       source addresses in 127.64.0.0/10 to 127.0.0.1:PORT,
                                       paced to at most 20,000 datagrams/s, bounded in count

Every address is on the loopback interface (127.0.0.0/8 is local on Linux), so nothing leaves
the machine.
"""
import socket
import struct
import sys
import time


def payloads(path):
    """UDP payloads of an Ethernet (or Linux cooked) pcap written by tcpdump."""
    data = open(path, "rb").read()
    magic, = struct.unpack("<I", data[:4])
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype, = struct.unpack(endian + "I", data[20:24])
    l2 = {1: 14, 113: 16, 276: 20}.get(linktype)
    if l2 is None:
        sys.exit(f"{path}: link type {linktype} not supported")
    out, off = [], 24
    while off + 16 <= len(data):
        _, _, caplen, _ = struct.unpack(endian + "IIII", data[off:off + 16])
        pkt = data[off + 16:off + 16 + caplen]
        off += 16 + caplen
        ip = pkt[l2:]
        if not ip or ip[0] >> 4 != 4:
            continue
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            continue
        out.append(ip[ihl + 8:])
    return out


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "count":
        print(len(payloads(sys.argv[2])))
        return
    if len(sys.argv) != 6 or sys.argv[1] != "flood":
        sys.exit(__doc__)
    dgrams = payloads(sys.argv[2])
    port, n, k = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    n = min(n, 1 << 20)
    sent, start = 0, time.monotonic()
    for i in range(n):
        # 127.64.0.1 upwards: one source address per exporter.
        a = (127 << 24) | (64 << 16) | (i + 1)
        src = socket.inet_ntoa(struct.pack(">I", a))
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((src, 0))
        for d in dgrams[:k]:
            s.sendto(d, ("127.0.0.1", port))
            sent += 1
        s.close()
        ahead = sent / 20000.0 - (time.monotonic() - start)
        if ahead > 0:
            time.sleep(ahead)
    print(sent)


if __name__ == "__main__":
    main()
