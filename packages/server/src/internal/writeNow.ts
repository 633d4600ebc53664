/**
 * Writes to a streaming HTTP response so the bytes leave now. Node's `ServerResponse.write`
 * corks the socket and uncorks it on the next tick (so a write's chunk framing goes out in
 * one system call). A writer that serves many responses in one run of a fiber (the sync hub's
 * fan-out, scheduled on microtasks, which hold off every next tick until the run ends) would
 * otherwise hold every response's bytes until the whole run is over. This undoes exactly the
 * cork the write added, which sends the framed chunk at once.
 */
import type { ServerResponse } from "node:http"

export const writeNow = (response: ServerResponse, chunk: string, onWritten: (error?: Error | null) => void): void => {
  const socket = response.socket
  // Corked already (by someone else): that cork is theirs to undo, and the write adds none.
  const corked = socket === null || socket.writableCorked > 0
  response.write(chunk, onWritten)
  if (!corked && socket.writableCorked > 0) socket.uncork()
}
