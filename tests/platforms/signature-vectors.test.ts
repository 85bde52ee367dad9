/// <reference types="node" />
// Signature checks against published vectors: Slack's worked example from "Verifying requests from Slack",
// and the Ed25519 key pairs and signatures of RFC 8032 section 7.1 (Discord publishes no vectors of its own;
// its scheme is plain Ed25519 over timestamp + body).
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { createDiscordAdapter } from "../../src/platforms/discord.ts";
import { createSlackAdapter } from "../../src/platforms/slack.ts";

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5";
const slackTimestamp = "1531420618";
const slackBody =
  "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const slackSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

const outbound = (nowMs: number) => ({ fetch, now: () => nowMs, log: () => undefined });

describe("Slack's published signature example", () => {
  const config = loadConfig({ SLACK_SIGNING_SECRET: slackSecret, SLACK_BOT_TOKEN: "xoxb-test" });
  const adapter = createSlackAdapter(config.slack, outbound(Number(slackTimestamp) * 1000 + 60_000));
  const headers = (signature: string, timestamp = slackTimestamp) => new Headers({ "x-slack-signature": signature, "x-slack-request-timestamp": timestamp });

  it("verifies", async () => {
    await expect(adapter.verify(headers(slackSignature), slackBody)).resolves.toBeUndefined();
  });

  it("refuses the same request with one byte changed in the body, the signature or the timestamp", async () => {
    await expect(adapter.verify(headers(slackSignature), slackBody.replace("roadrunner", "roadrunnex"))).rejects.toMatchObject({ status: 401 });
    await expect(adapter.verify(headers(slackSignature.replace(/3$/, "4")), slackBody)).rejects.toMatchObject({ status: 401 });
    await expect(adapter.verify(headers(slackSignature, "1531420619"), slackBody)).rejects.toMatchObject({ status: 401 });
  });
});

// RFC 8032 section 7.1, TEST 1 (secret key, public key) and TEST 2 (public key, message 0x72, signature).
const rfcSeed = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const rfcPublicKey = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
const rfcTest1Signature = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";
const rfcTest2PublicKey = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
const rfcTest2Signature = "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00";

const bytes = (hex: string) => Uint8Array.from(hex.match(/../g)!.map((pair) => parseInt(pair, 16)));
const hex = (buffer: ArrayBuffer) => Buffer.from(buffer).toString("hex");

describe("Ed25519 with RFC 8032 vectors (the Discord scheme)", () => {
  it("crypto.subtle reproduces and verifies the RFC signatures the Discord adapter relies on", async () => {
    const test1Key = await crypto.subtle.importKey("raw", bytes(rfcPublicKey), { name: "Ed25519" }, false, ["verify"]);
    expect(await crypto.subtle.verify("Ed25519", test1Key, bytes(rfcTest1Signature), new Uint8Array())).toBe(true);
    const test2Key = await crypto.subtle.importKey("raw", bytes(rfcTest2PublicKey), { name: "Ed25519" }, false, ["verify"]);
    expect(await crypto.subtle.verify("Ed25519", test2Key, bytes(rfcTest2Signature), bytes("72"))).toBe(true);
    expect(await crypto.subtle.verify("Ed25519", test2Key, bytes(rfcTest2Signature), bytes("73"))).toBe(false);
    // The RFC's secret key signs the empty message into TEST 1's signature (Ed25519 is deterministic).
    const secret = await crypto.subtle.importKey("pkcs8", bytes(`302e020100300506032b657004220420${rfcSeed}`), { name: "Ed25519" }, false, ["sign"]);
    expect(hex(await crypto.subtle.sign("Ed25519", secret, new Uint8Array()))).toBe(rfcTest1Signature);
  });

  it("the Discord adapter accepts an interaction signed with the RFC key pair and refuses a changed body", async () => {
    const nowMs = 1_764_000_000_000;
    const timestamp = String(nowMs / 1000);
    const body = JSON.stringify({ id: "1", type: 1 });
    const secret = await crypto.subtle.importKey("pkcs8", bytes(`302e020100300506032b657004220420${rfcSeed}`), { name: "Ed25519" }, false, ["sign"]);
    const signature = hex(await crypto.subtle.sign("Ed25519", secret, new TextEncoder().encode(timestamp + body)));
    const config = loadConfig({ DISCORD_PUBLIC_KEY: rfcPublicKey, DISCORD_APPLICATION_ID: "app" });
    const adapter = createDiscordAdapter(config.discord, outbound(nowMs));
    const headers = new Headers({ "x-signature-ed25519": signature, "x-signature-timestamp": timestamp });
    await expect(adapter.verify(headers, body)).resolves.toBeUndefined();
    await expect(adapter.verify(headers, body.replace('"1"', '"2"'))).rejects.toMatchObject({ status: 401 });
  });
});
