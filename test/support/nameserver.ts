import dgram from 'node:dgram';

/** The question's name of a DNS query: length-prefixed labels after the 12-byte header; and where the question ends. */
function question(packet: Buffer): { name: string; type: number; end: number } {
  const labels: string[] = [];
  let at = 12;
  for (; at < packet.length && packet[at]! > 0; at += packet[at]! + 1) labels.push(packet.subarray(at + 1, at + 1 + packet[at]!).toString('latin1'));
  return { name: labels.join('.').toLowerCase(), type: packet.readUInt16BE(at + 1), end: at + 5 };
}

/** A NOERROR answer to `query`: one A record (TTL 60 s) when `ipv4` is given and an A record was asked for, else none. */
function answer(query: Buffer, ipv4: string): Buffer {
  const { type, end } = question(query);
  const header = Buffer.from(query.subarray(0, 12));
  const records = type === 1 ? 1 : 0;
  header.writeUInt16BE(0x8180, 2); // a response, recursion desired and available, NOERROR
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(records, 6);
  header.writeUInt32BE(0, 8);
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0); // the question's name
  record.writeUInt16BE(1, 2); // A
  record.writeUInt16BE(1, 4); // IN
  record.writeUInt32BE(60, 6);
  record.writeUInt16BE(4, 10);
  ipv4.split('.').forEach((octet, i) => (record[12 + i] = Number(octet)));
  return Buffer.concat([header, query.subarray(12, end), ...(records ? [record] : [])]);
}

/**
 * A nameserver on a loopback UDP port for WEBHOOK_DNS_SERVERS: answers the names of `ipv4ByName` (A
 * records; no AAAA) and never answers any other, as a domain's nameserver that is down. `asked` keeps
 * the name of every query, A and AAAA alike.
 */
export async function startNameserver(ipv4ByName: Record<string, string> = {}) {
  const socket = dgram.createSocket('udp4');
  const asked: string[] = [];
  socket.on('message', (packet, from) => {
    const { name } = question(packet);
    asked.push(name);
    const ipv4 = ipv4ByName[name];
    if (ipv4) socket.send(answer(packet, ipv4), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
