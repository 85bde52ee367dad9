// Server-side request forgery guard for web_fetch. A model can be talked (by a web page, a chat message)
// into fetching internal services, so unless HERMES_FETCH_ALLOW_PRIVATE is set we refuse any address that is
// not on the public internet, in every spelling a URL parser or an OS resolver accepts for it: loose IPv4
// (`2130706433`, `0x7f.1`, `017700000001`), IPv4 embedded in IPv6 (mapped, compatible, NAT64, 6to4, Teredo),
// and names that resolve to the machine or the cloud metadata service.

export type AddressCheck = { allowed: true } | { allowed: false; reason: string };

export type IpAddress = { version: 4; value: number } | { version: 6; groups: number[] };

export interface UrlCheckOptions {
  allowPrivate: boolean;
  /** DNS lookup (Node/Bun/Deno); without it only literal addresses and well-known names are checked. */
  resolveHost?: (hostname: string) => Promise<string[]>;
}

/** [network, prefix length, what it is]; 0.0.0.0/8 also catches `http://0/`, which reaches localhost on Linux. */
const BLOCKED_IPV4: ReadonlyArray<readonly [string, number, string]> = [
  ["0.0.0.0", 8, "'this network' address"],
  ["10.0.0.0", 8, "private address"],
  ["100.64.0.0", 10, "carrier-grade NAT address"],
  ["127.0.0.0", 8, "loopback address"],
  ["169.254.0.0", 16, "link-local address (includes the cloud metadata service 169.254.169.254)"],
  ["172.16.0.0", 12, "private address"],
  ["192.0.0.0", 24, "IETF protocol assignment address"],
  ["192.168.0.0", 16, "private address"],
  ["198.18.0.0", 15, "benchmarking address"],
  ["224.0.0.0", 4, "multicast address"],
  ["240.0.0.0", 4, "reserved address"],
];

const BLOCKED_IPV4_RANGES = BLOCKED_IPV4.map(([network, prefix, reason]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { network: (parseIPv4(network) ?? 0) & mask, mask, reason };
});

/** Why this IPv4 address (as an unsigned 32-bit number) is refused, or null when it is public. */
export function blockedIPv4Reason(value: number): string | null {
  for (const range of BLOCKED_IPV4_RANGES) {
    if (((value & range.mask) >>> 0) === range.network >>> 0) return range.reason;
  }
  return null;
}

/** Why this IPv6 address (eight 16-bit groups) is refused, or null when it is public. */
export function blockedIPv6Reason(groups: number[]): string | null {
  const group = (index: number): number => groups[index] ?? 0;
  const embedded = (high: number, low: number): number => ((group(high) << 16) | group(low)) >>> 0;
  const zeroUntil = (end: number): boolean => groups.slice(0, end).every((value) => value === 0);
  const viaIPv4 = (value: number, how: string): string | null => {
    const reason = blockedIPv4Reason(value);
    return reason === null ? null : `${how} ${reason}`;
  };

  if (zeroUntil(8)) return "unspecified address";
  if (zeroUntil(7) && group(7) === 1) return "loopback address";
  if (zeroUntil(5) && group(5) === 0xffff) return viaIPv4(embedded(6, 7), "IPv4-mapped");
  // Deprecated IPv4-compatible form (::a.b.c.d); some stacks still route it to the IPv4 address.
  if (zeroUntil(6)) return viaIPv4(embedded(6, 7), "IPv4-compatible");
  if (group(0) === 0x64 && group(1) === 0xff9b) {
    if (group(2) === 0 && group(3) === 0 && group(4) === 0 && group(5) === 0) {
      return viaIPv4(embedded(6, 7), "NAT64");
    }
    if (group(2) === 1) return "local-use NAT64 address";
  }
  if (group(0) === 0x2002) return viaIPv4(embedded(1, 2), "6to4");
  // Teredo stores the client's IPv4 address with every bit inverted.
  if (group(0) === 0x2001 && group(1) === 0) return viaIPv4(~embedded(6, 7) >>> 0, "Teredo");
  if ((group(0) & 0xfe00) === 0xfc00) return "unique-local address";
  if ((group(0) & 0xffc0) === 0xfe80) return "link-local address";
  if ((group(0) & 0xffc0) === 0xfec0) return "site-local address";
  if ((group(0) & 0xff00) === 0xff00) return "multicast address";
  return null;
}

/** Why this literal address (any spelling) is refused; null when it is public or not an address at all. */
export function blockedAddressReason(text: string): string | null {
  const address = parseIpAddress(text);
  if (address === null) return null;
  return address.version === 4 ? blockedIPv4Reason(address.value) : blockedIPv6Reason(address.groups);
}

/**
 * Checks a URL host (as `URL.hostname` gives it: lowercase, IPv6 in brackets) without DNS. Names are
 * refused when they always mean this machine or an internal network: `localhost` and `*.localhost`
 * (RFC 6761), `*.internal` (cloud-internal DNS, e.g. `metadata.google.internal`), `*.local` (mDNS), and
 * single-label names, which the OS resolver completes with the local search domain.
 */
export function checkHostname(hostname: string): AddressCheck {
  const host = hostname.toLowerCase().replace(/\.+$/u, "");
  if (host === "") return { allowed: false, reason: "empty host" };
  const address = parseIpAddress(host);
  if (address !== null) {
    const reason = address.version === 4 ? blockedIPv4Reason(address.value) : blockedIPv6Reason(address.groups);
    return reason === null ? { allowed: true } : { allowed: false, reason };
  }
  if (host === "localhost" || host.endsWith(".localhost")) return { allowed: false, reason: "localhost name" };
  if (host === "metadata.google.internal" || host.endsWith(".internal")) {
    return { allowed: false, reason: "internal name (cloud metadata or private DNS)" };
  }
  if (host.endsWith(".local")) return { allowed: false, reason: "mDNS (.local) name" };
  if (!host.includes(".")) return { allowed: false, reason: "single-label name (resolved by local search domains)" };
  return { allowed: true };
}

/**
 * The full check of one request target (each redirect hop is checked again). With `resolveHost`, every
 * address the name resolves to must be public. A name could still re-resolve differently at connect time
 * (DNS rebinding); runtimes give fetch no way to pin the address, so this narrows the window rather than
 * closing it. Workers need no lookup: their fetch cannot reach private networks.
 */
export async function checkUrl(url: URL, options: UrlCheckOptions): Promise<AddressCheck> {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return { allowed: false, reason: `only http and https URLs can be fetched, not ${url.protocol}` };
  }
  if (options.allowPrivate) return { allowed: true };

  const hostCheck = checkHostname(url.hostname);
  if (!hostCheck.allowed) return { allowed: false, reason: `${url.hostname} is a ${hostCheck.reason}` };
  if (options.resolveHost === undefined || parseIpAddress(url.hostname) !== null) return { allowed: true };

  let addresses: string[];
  try {
    addresses = await options.resolveHost(url.hostname);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { allowed: false, reason: `could not resolve ${url.hostname}: ${message}` };
  }
  if (addresses.length === 0) return { allowed: false, reason: `could not resolve ${url.hostname}` };
  for (const address of addresses) {
    const reason = blockedAddressReason(address);
    if (reason !== null) return { allowed: false, reason: `${url.hostname} resolves to ${address}, a ${reason}` };
    if (parseIpAddress(address) === null) {
      return { allowed: false, reason: `${url.hostname} resolved to an unparseable address` };
    }
  }
  return { allowed: true };
}

/** Parses an IPv4 address in any spelling (see parseIPv4) or an IPv6 address, with or without brackets. */
export function parseIpAddress(text: string): IpAddress | null {
  const ipv4 = parseIPv4(text);
  if (ipv4 !== null) return { version: 4, value: ipv4 };
  const groups = parseIPv6(text);
  return groups === null ? null : { version: 6, groups };
}

/**
 * IPv4 the way the WHATWG URL parser and inet_aton read it: one to four dot-separated parts, each decimal,
 * octal (leading 0) or hex (0x); the last part fills the remaining bytes (`127.1`, `2130706433`).
 * Returns the address as an unsigned 32-bit number, or null when the text is not such an address.
 */
export function parseIPv4(text: string): number | null {
  const parts = text.split(".");
  if (parts.length > 1 && parts.at(-1) === "") parts.pop();
  if (parts.length === 0 || parts.length > 4) return null;
  const numbers: number[] = [];
  for (const part of parts) {
    const value = parseIPv4Part(part);
    if (value === null) return null;
    numbers.push(value);
  }
  const last = numbers.pop() ?? 0;
  if (numbers.some((value) => value > 255)) return null;
  if (last >= 256 ** (4 - numbers.length)) return null;
  let address = last;
  for (const [index, value] of numbers.entries()) address += value * 256 ** (3 - index);
  return address;
}

function parseIPv4Part(part: string): number | null {
  let digits = part;
  let radix = 10;
  if (/^0x/iu.test(part)) {
    digits = part.slice(2);
    radix = 16;
    if (digits === "") return 0; // WHATWG reads a bare "0x" as zero
  } else if (part.length > 1 && part.startsWith("0")) {
    digits = part.slice(1);
    radix = 8;
  }
  const pattern = radix === 16 ? /^[0-9a-f]+$/iu : radix === 8 ? /^[0-7]+$/u : /^[0-9]+$/u;
  if (!pattern.test(digits)) return null;
  const value = Number.parseInt(digits, radix);
  return Number.isSafeInteger(value) ? value : null;
}

/** Parses IPv6 text (brackets and a `%zone` suffix allowed) into eight 16-bit groups, or null. */
export function parseIPv6(text: string): number[] | null {
  let body = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  const zone = body.indexOf("%");
  if (zone !== -1) body = body.slice(0, zone);
  if (!body.includes(":")) return null;

  const halves = body.split("::");
  if (halves.length > 2) return null;
  const head = parseIPv6Groups(halves[0] ?? "", halves.length === 1);
  const tail = halves.length === 2 ? parseIPv6Groups(halves[1] ?? "", true) : [];
  if (head === null || tail === null) return null;
  if (halves.length === 1) return head.length === 8 ? head : null;
  if (head.length + tail.length > 7) return null;
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}

function parseIPv6Groups(text: string, mayEndInIPv4: boolean): number[] | null {
  if (text === "") return [];
  const pieces = text.split(":");
  const groups: number[] = [];
  for (const [index, piece] of pieces.entries()) {
    if (mayEndInIPv4 && index === pieces.length - 1 && piece.includes(".")) {
      // Inside IPv6 only the strict dotted-quad form is valid.
      if (!/^\d{1,3}(\.\d{1,3}){3}$/u.test(piece)) return null;
      const bytes = piece.split(".").map(Number);
      if (bytes.some((byte) => byte > 255)) return null;
      const [a = 0, b = 0, c = 0, d = 0] = bytes;
      groups.push((a << 8) | b, (c << 8) | d);
      continue;
    }
    if (!/^[0-9a-f]{1,4}$/iu.test(piece)) return null;
    groups.push(Number.parseInt(piece, 16));
  }
  return groups;
}
