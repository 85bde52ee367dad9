// Web Crypto only, so the same code runs on Node, Bun, Deno and workerd.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

export function fromBase64(text: string): Uint8Array<ArrayBuffer> {
  return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
}

export function toHex(bytes: Uint8Array): string {
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

export async function sha256Hex(text: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text))));
}

/**
 * Compares two secrets without an early exit, so the time taken does not tell how many leading
 * characters matched. Both sides are hashed first so that the length of the secret does not leak either.
 */
export async function constantTimeEqual(given: string, expected: string): Promise<boolean> {
  const [left, right] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(given)),
    crypto.subtle.digest("SHA-256", encoder.encode(expected)),
  ]);
  const a = new Uint8Array(left);
  const b = new Uint8Array(right);
  let difference = 0;
  for (let index = 0; index < a.length; index++) difference |= a[index]! ^ b[index]!;
  return difference === 0;
}

export function randomId(prefix: string, bytes = 12): string {
  const random = crypto.getRandomValues(new Uint8Array(bytes));
  return `${prefix}_${toHex(random)}`;
}

const cipherVersion = "v1";

async function importKey(rawKey: Uint8Array<ArrayBuffer>): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", rawKey, "AES-GCM", false, ["encrypt", "decrypt"]);
}

/** AES-256-GCM with a random 96-bit IV; the output is `v1:<base64(iv || ciphertext)>`. */
export async function encryptSecret(rawKey: Uint8Array<ArrayBuffer>, plaintext: string): Promise<string> {
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, await importKey(rawKey), encoder.encode(plaintext)));
  const joined = new Uint8Array(iv.length + sealed.length);
  joined.set(iv);
  joined.set(sealed, iv.length);
  return `${cipherVersion}:${toBase64(joined)}`;
}

export async function decryptSecret(rawKey: Uint8Array<ArrayBuffer>, sealed: string): Promise<string> {
  if (!sealed.startsWith(`${cipherVersion}:`)) throw new Error("unknown secret format");
  const joined = fromBase64(sealed.slice(cipherVersion.length + 1));
  const plain = await crypto.subtle.decrypt({ name: "AES-GCM", iv: joined.slice(0, 12) }, await importKey(rawKey), joined.slice(12));
  return decoder.decode(plain);
}
