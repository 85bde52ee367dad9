// Both SDKs end a stream quietly when its signal aborts and clear their request timeout once the
// response headers arrive, so a stream that stalls or is cut after the headers would otherwise look
// like a short, complete answer. The adapters read streams through this guard, which turns those
// endings into errors that classifyProviderError recognises by `kind`.

/** The stream ended before the provider said it was finished; the partial output must be discarded. */
export class StreamCutError extends Error {
  override readonly name = "StreamCutError";
  readonly kind = "transport";
}

/** No stream event arrived within the idle limit (the SDK's own timeout only covers the headers). */
export class StreamStallError extends Error {
  override readonly name = "StreamStallError";
  readonly kind = "timeout";
}

export interface StreamGuard {
  /** Pass to the SDK call: aborts on the caller's signal and when the stream stalls. */
  readonly signal: AbortSignal;
  /** Yields the stream's events, restarting the idle timer before each read. */
  read<T>(events: AsyncIterable<T>): AsyncGenerator<T>;
  /** The error to throw when the stream ended without its final event. */
  endedEarly(): unknown;
  /** Stops the idle timer and forgets the caller's signal; call once the call is over. */
  dispose(): void;
}

export function createStreamGuard(idleMs: number, callerSignal: AbortSignal | undefined): StreamGuard {
  const controller = new AbortController();
  let stalled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const forwardAbort = () => controller.abort(callerSignal?.reason);
  if (callerSignal?.aborted) forwardAbort();
  else callerSignal?.addEventListener("abort", forwardAbort, { once: true });

  // Settles a pending read when the stall timer or the caller aborts, even if the fetch in use does
  // not tie its body to the signal.
  const aborted = new Promise<never>((_, reject) => {
    controller.signal.addEventListener("abort", () => reject(controller.signal.reason), { once: true });
  });
  aborted.catch(() => {});

  const restartTimer = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      controller.abort();
    }, idleMs);
  };

  // What ended the stream: a stall, the caller, an answer from the provider, or a broken connection.
  const failure = (cause?: unknown): unknown => {
    if (stalled) return new StreamStallError(`the provider sent nothing for ${idleMs} ms`, { cause });
    if (callerSignal?.aborted) return callerSignal.reason ?? cause;
    if (isProviderAnswer(cause)) return cause;
    const detail = cause instanceof Error ? `: ${cause.message}` : "";
    return new StreamCutError(`the stream ended before the provider finished${detail}`, { cause });
  };

  return {
    signal: controller.signal,
    async *read<T>(events: AsyncIterable<T>): AsyncGenerator<T> {
      const iterator = events[Symbol.asyncIterator]();
      let done = false;
      try {
        while (true) {
          let next: IteratorResult<T>;
          try {
            restartTimer();
            next = await Promise.race([iterator.next(), aborted]);
          } catch (error) {
            throw failure(error);
          }
          if (next.done === true) {
            done = true;
            return;
          }
          yield next.value;
        }
      } finally {
        clearTimeout(timer);
        // Stopped early (stall, abort, a throwing callback): the SDK's generator aborts its request on
        // return. Not awaited: a read still pending on a body that ignores the signal would never settle.
        if (!done) {
          controller.abort();
          void Promise.resolve(iterator.return?.()).catch(() => {});
        }
      }
    },
    endedEarly: () => failure(),
    dispose() {
      clearTimeout(timer);
      callerSignal?.removeEventListener("abort", forwardAbort);
    },
  };
}

/**
 * Rethrows the caller's abort reason instead of the SDK's generic "Request was aborted", so a deadline
 * set with AbortSignal.timeout() stays a TimeoutError.
 */
export function abortReasonOr(error: unknown, callerSignal: AbortSignal | undefined): unknown {
  return callerSignal?.aborted === true && callerSignal.reason !== undefined ? callerSignal.reason : error;
}

/** An error event inside the stream (Anthropic `overloaded_error`, OpenAI `error` chunks) is an answer. */
function isProviderAnswer(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const candidate = error as { status?: unknown; error?: unknown };
  return typeof candidate.status === "number" || (typeof candidate.error === "object" && candidate.error !== null);
}
