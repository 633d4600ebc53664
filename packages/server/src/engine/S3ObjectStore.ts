/**
 * The S3-compatible object store for deployments (`@aws-sdk/client-s3`): the same
 * content-addressed layout as the filesystem backend, as keys `<prefix><database id>/<sha256>`
 * in one bucket. An upload is spooled to a local temp file while it is hashed (S3 needs the
 * length and the key, the sha256, before the PUT), then PUT; the PUT's success is the
 * durability point, so `put` answers only after it. A blob's `touchedAt` is its LastModified,
 * which `touch` restarts by copying the object onto itself: only when the same bytes are uploaded
 * again (their new handle keeps them), never for collection, whose marks live beside the store.
 */
import { randomUUID } from "node:crypto"
import { closeSync, createReadStream, existsSync, mkdirSync, openSync, readdirSync, rmSync, statSync } from "node:fs"
import { join } from "node:path"
import type { Readable } from "node:stream"
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client
} from "@aws-sdk/client-s3"
import { type Blob, ObjectStoreError, type ObjectStoreShape, writeHashed } from "@cairn/store/ObjectStore"
import { Effect, Option } from "effect"

export interface S3Options {
  readonly client: S3Client
  readonly bucket: string
  /** Prepended to every key (e.g. `cairn/`). */
  readonly prefix: string
  /** Local directory for spooling uploads while they are hashed. */
  readonly spoolDir: string
}

const SHA256 = /^[0-9a-f]{64}$/
const ID = /^[A-Za-z0-9_-]{1,128}$/

const notFound = (error: unknown) => {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } }
  return e.name === "NotFound" || e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404
}

export const makeS3 = (options: S3Options): ObjectStoreShape => {
  const { client, bucket, prefix } = options
  const keyOf = (databaseId: string, sha256: string) => {
    if (!ID.test(databaseId) || !SHA256.test(sha256)) throw new Error("not an object key")
    return `${prefix}${databaseId}/${sha256}`
  }
  const call = <A>(f: (signal: AbortSignal) => Promise<A>) =>
    Effect.tryPromise({ try: f, catch: (cause) => new ObjectStoreError({ cause }) })

  const head = (databaseId: string, sha256: string) =>
    call((abortSignal) => client.send(new HeadObjectCommand({ Bucket: bucket, Key: keyOf(databaseId, sha256) }), { abortSignal })).pipe(
      Effect.map((h): Option.Option<Blob> => Option.some({ sha256, size: h.ContentLength ?? 0, touchedAt: h.LastModified?.getTime() ?? 0 })),
      Effect.catchIf((e) => notFound(e.cause), () => Effect.succeed(Option.none<Blob>()))
    )

  const touch = (databaseId: string, sha256: string) =>
    call((abortSignal) =>
      client.send(
        new CopyObjectCommand({
          Bucket: bucket,
          Key: keyOf(databaseId, sha256),
          CopySource: `${bucket}/${keyOf(databaseId, sha256)}`,
          MetadataDirective: "REPLACE",
          Metadata: { touched: String(Date.now()) }
        }),
        { abortSignal }
      )
    ).pipe(Effect.asVoid)

  const put: ObjectStoreShape["put"] = (databaseId, body, limit) =>
    Effect.acquireUseRelease(
      Effect.try({
        try: () => {
          mkdirSync(options.spoolDir, { recursive: true })
          const path = join(options.spoolDir, randomUUID())
          return { path, fd: openSync(path, "wx"), open: true }
        },
        catch: (cause) => new ObjectStoreError({ cause })
      }),
      (file) =>
        Effect.gen(function* () {
          const { sha256, size } = yield* writeHashed(file.fd, body, limit)
          closeSync(file.fd)
          file.open = false
          const existing = yield* head(databaseId, sha256)
          if (Option.isSome(existing)) {
            // De-duplicated: keep the stored bytes, restart their retention clock.
            yield* touch(databaseId, sha256)
            return { sha256, size, touchedAt: Date.now(), added: false }
          }
          yield* Effect.acquireUseRelease(
            Effect.sync(() => {
              const body = createReadStream(file.path)
              // The SDK reports a failed PUT through its promise; a read error must not escape as an 'error' event.
              body.on("error", () => undefined)
              return body
            }),
            (body) =>
              call((abortSignal) =>
                client.send(new PutObjectCommand({ Bucket: bucket, Key: keyOf(databaseId, sha256), Body: body, ContentLength: size }), { abortSignal })
              ),
            // A PUT that failed before reading the whole body leaves the file open: close it now, not at garbage collection.
            (body) => Effect.sync(() => body.destroy())
          )
          return { sha256, size, touchedAt: Date.now(), added: true }
        }),
      (file) =>
        Effect.sync(() => {
          if (file.open) closeSync(file.fd)
          rmSync(file.path, { force: true })
        })
    )

  const listKeys = (listPrefix: string, delimiter?: string) =>
    Effect.gen(function* () {
      const contents: Array<{ key: string; size: number; modified: number }> = []
      const prefixes: Array<string> = []
      let token: string | undefined
      do {
        const page = yield* call((abortSignal) =>
          client.send(
            new ListObjectsV2Command({ Bucket: bucket, Prefix: listPrefix, ContinuationToken: token, ...(delimiter ? { Delimiter: delimiter } : {}) }),
            { abortSignal }
          )
        )
        for (const c of page.Contents ?? []) contents.push({ key: c.Key ?? "", size: c.Size ?? 0, modified: c.LastModified?.getTime() ?? 0 })
        for (const p of page.CommonPrefixes ?? []) if (p.Prefix) prefixes.push(p.Prefix)
        token = page.IsTruncated ? page.NextContinuationToken : undefined
      } while (token !== undefined)
      return { contents, prefixes }
    })

  return {
    put,
    stat: head,
    read: (databaseId, sha256, range) =>
      call((abortSignal) =>
        client.send(
          new GetObjectCommand({ Bucket: bucket, Key: keyOf(databaseId, sha256), ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }),
          { abortSignal }
        )
      ).pipe(
        Effect.map((answer) => {
          const body = answer.Body as Readable
          // As the filesystem backend's: the consumer sees the failure, a body dropped unread never escapes.
          body.on("error", () => undefined)
          return body
        })
      ),
    list: (databaseId) =>
      Effect.map(listKeys(`${prefix}${databaseId}/`), ({ contents }) =>
        contents.flatMap((c) => {
          const sha256 = c.key.slice(c.key.lastIndexOf("/") + 1)
          return SHA256.test(sha256) ? [{ sha256, size: c.size, touchedAt: c.modified }] : []
        })
      ),
    remove: (databaseId, sha256) =>
      call((abortSignal) => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: keyOf(databaseId, sha256) }), { abortSignal })).pipe(Effect.asVoid),
    databases: Effect.map(listKeys(prefix, "/"), ({ prefixes }) =>
      prefixes.map((p) => p.slice(prefix.length, -1)).filter((id) => ID.test(id))
    ),
    touch,
    // The spool is shared by every database: a pass for any of them sweeps it.
    sweep: (_databaseId, before) =>
      Effect.try({
        try: () => {
          let removed = 0
          for (const name of existsSync(options.spoolDir) ? readdirSync(options.spoolDir) : []) {
            const path = join(options.spoolDir, name)
            if (statSync(path).mtimeMs < before) {
              rmSync(path, { force: true })
              removed++
            }
          }
          return removed
        },
        catch: (cause) => new ObjectStoreError({ cause })
      })
  }
}

/** An S3 client for an S3-compatible endpoint (checksums only where S3 requires them, which every compatible server accepts). */
export const s3Client = (options: {
  readonly region: string
  readonly endpoint?: string | undefined
  readonly forcePathStyle: boolean
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined
}) =>
  new S3Client({
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {})
  })
