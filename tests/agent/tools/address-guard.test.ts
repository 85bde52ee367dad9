import { describe, expect, it } from "vitest";
import { checkHostname, checkUrl, parseIPv4, parseIPv6 } from "../../../src/agent/tools/address-guard.ts";

/** Checks a URL the way web_fetch does: through the WHATWG parser first, then the guard. */
async function verdict(url: string, resolveHost?: (hostname: string) => Promise<string[]>): Promise<string> {
  const check = await checkUrl(new URL(url), { allowPrivate: false, ...(resolveHost ? { resolveHost } : {}) });
  return check.allowed ? "allowed" : "refused";
}

describe("address guard", () => {
  it.each([
    // loopback, in every spelling
    "http://127.0.0.1/",
    "http://127.1/",
    "http://127.255.255.254:8080/",
    "http://2130706433/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://017700000001/",
    "http://0177.0.0.1/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://app.localhost:3000/",
    // this network
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    // private and shared
    "http://10.0.0.1/",
    "http://10.255.255.255/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://100.127.255.255/",
    "http://[::ffff:10.1.2.3]/",
    "http://[::ffff:192.168.0.1]/",
    "http://[64:ff9b::10.0.0.1]/",
    "http://[2002:c0a8:0101::]/",
    // link-local and cloud metadata
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.0.1/",
    "http://0xa9fea9fe/",
    "http://2852039166/",
    "http://[::ffff:169.254.169.254]/",
    "http://[fe80::1]/",
    "http://[febf::1]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata.google.internal./",
    // unique-local, multicast, reserved
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[ff02::1]/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    // names that resolve inside the network
    "http://printer.local/",
    "http://intranet/",
  ])("refuses %s", async (url) => {
    expect(await verdict(url)).toBe("refused");
  });

  it.each([
    "https://example.com/",
    "http://93.184.216.34/",
    "http://8.8.8.8/",
    "http://172.15.255.255/",
    "http://172.32.0.1/",
    "http://100.63.255.255/",
    "http://100.128.0.1/",
    "http://169.253.255.255/",
    "http://11.0.0.1/",
    "http://[2606:4700:4700::1111]/",
    "http://[::ffff:8.8.8.8]/",
    "http://[2001:db8::1]/",
    "https://localhost.example.com/",
    "https://internal.example.com/",
  ])("allows %s", async (url) => {
    expect(await verdict(url)).toBe("allowed");
  });

  it.each(["ftp://example.com/", "file:///etc/passwd", "data:text/plain,hi", "javascript:alert(1)", "gopher://example.com/"])(
    "refuses the scheme of %s even when private addresses are allowed",
    async (url) => {
      expect(await checkUrl(new URL(url), { allowPrivate: true })).toMatchObject({ allowed: false });
    },
  );

  it("allows private addresses when configured to", async () => {
    expect(await checkUrl(new URL("http://127.0.0.1:8080/"), { allowPrivate: true })).toEqual({ allowed: true });
  });

  it("refuses a name when any resolved address is private, or when it does not resolve", async () => {
    const dns: Record<string, string[]> = {
      "public.example": ["93.184.216.34", "2606:2800:220:1::"],
      "rebind.example": ["93.184.216.34", "10.0.0.7"],
      "v6-loopback.example": ["::1"],
      "empty.example": [],
    };
    const resolveHost = async (hostname: string) => {
      const addresses = dns[hostname];
      if (addresses === undefined) throw new Error("ENOTFOUND");
      return addresses;
    };
    expect(await verdict("https://public.example/", resolveHost)).toBe("allowed");
    expect(await verdict("https://rebind.example/", resolveHost)).toBe("refused");
    expect(await verdict("https://v6-loopback.example/", resolveHost)).toBe("refused");
    expect(await verdict("https://empty.example/", resolveHost)).toBe("refused");
    expect(await verdict("https://missing.example/", resolveHost)).toBe("refused");
    const reason = await checkUrl(new URL("https://rebind.example/"), { allowPrivate: false, resolveHost });
    expect(reason).toEqual({ allowed: false, reason: "rebind.example resolves to 10.0.0.7, a private address" });
  });

  it("checks raw spellings the URL parser never sees", () => {
    expect(checkHostname("0x7f.0.0.1")).toMatchObject({ allowed: false, reason: "loopback address" });
    expect(checkHostname("127.000.000.001")).toMatchObject({ allowed: false });
    expect(checkHostname("[::ffff:a9fe:a9fe]")).toMatchObject({ allowed: false });
    expect(checkHostname("[2001:0:4136:e378:8000:63bf:80ff:fffe]")).toMatchObject({ allowed: false }); // Teredo, 127.0.0.1
    expect(parseIPv4("2130706433")).toBe(0x7f000001);
    expect(parseIPv4("0x7f.1")).toBe(0x7f000001);
    expect(parseIPv4("1.2.3.4.")).toBe(0x01020304);
    expect(parseIPv4("256.1.1.1")).toBeNull();
    expect(parseIPv4("1.2.3.4.5")).toBeNull();
    expect(parseIPv4("example.com")).toBeNull();
    expect(parseIPv4("09.1.1.1")).toBeNull();
    expect(parseIPv6("[fe80::1%25eth0]")).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(parseIPv6("1::2::3")).toBeNull();
    expect(parseIPv6("::ffff:1.2.3.4")).toEqual([0, 0, 0, 0, 0, 0xffff, 0x0102, 0x0304]);
  });
});
