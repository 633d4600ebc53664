/**
 * A transport's direct line to one live changes stream. When the transport provides it
 * to `Sync.changes`, a caught-up stream leaves its live tail to the database's hub, which
 * writes each batch straight to the transport as pre-encoded text, framed once by the
 * transport, instead of passing every batch of every stream through the stream and the
 * RPC server's per-client encoding. The stream takes over again (and is paced by the
 * transport as before) whenever the sink refuses a batch or the hub has a resnapshot.
 */
import { Context } from "effect"

export interface Sink {
  /**
   * Sends `message` (the JSON text of one encoded `SyncMessage`) as the stream's next
   * element, now; `false` when it cannot (no room in the exchange's buffer, or gone).
   */
  readonly offer: (message: string) => boolean
}

export class SyncLiveSink extends Context.Tag("@cairn/domain/SyncLiveSink")<SyncLiveSink, Sink>() {}
