/**
 * Writes to a streaming HTTP response so the bytes leave now. Node's `ServerResponse.write`
 * corks the socket and uncorks it on the next tick (so a write's chunk framing goes out in
 * one system call). A writer that serves many responses in one run of a fiber (the sync hub's
 * fan-out, scheduled on microtasks, which hold off every next tick until the run ends) would
 * otherwise hold every response's bytes until the whole run is over.
 *
 * Once the response's headers have left and it is a plain chunked body with nothing queued
 * ahead, the chunk goes to the socket as one framed write, the exact bytes `write` would send
 * (size line, chunk, CRLF) without its four queued pieces and cork: the hub writes one chunk to
 * every live stream on each commit. Otherwise it is `write`, undoing exactly the cork the write
 * added, which sends the framed chunk at once.
 */
import type { ServerResponse } from "node:http"
import type { Socket } from "node:net"

/** The response's own state `write` consults (Node's `OutgoingMessage`), read only. */
interface Outgoing {
  readonly _headerSent?: boolean
  readonly _hasBody?: boolean
  readonly chunkedEncoding?: boolean
  readonly outputData?: ReadonlyArray<unknown>
}

/** `write` would send `chunk` straight to this socket, framed, with nothing of the response ahead of it. */
const plainChunked = (response: ServerResponse, socket: Socket, chunk: string): boolean => {
  const outgoing = response as unknown as Outgoing
  return (
    chunk.length > 0 &&
    outgoing._headerSent === true &&
    outgoing._hasBody === true &&
    outgoing.chunkedEncoding === true &&
    outgoing.outputData?.length === 0 &&
    response.writableCorked === 0 &&
    !response.writableEnded &&
    !response.destroyed &&
    (socket as unknown as { readonly _httpMessage?: unknown })._httpMessage === response &&
    socket.writable
  )
}

export const writeNow = (response: ServerResponse, chunk: string, onWritten: (error?: Error | null) => void): void => {
  const socket = response.socket
  if (socket !== null && plainChunked(response, socket, chunk)) {
    // A socket corked by someone else holds it until they uncork, as it would `write`'s pieces.
    socket.write(`${Buffer.byteLength(chunk).toString(16)}\r\n${chunk}\r\n`, onWritten)
    return
  }
  // Corked already (by someone else): that cork is theirs to undo, and the write adds none.
  const corked = socket === null || socket.writableCorked > 0
  response.write(chunk, onWritten)
  if (!corked && socket.writableCorked > 0) socket.uncork()
}
