// The object store backends the object storage suite runs against: the filesystem under
// the data directory, and an S3-compatible server (s3rver) on 127.0.0.1 started by the test.
import { mkdtempSync } from "node:fs"
import { existsSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { statSync } from "node:fs"
import { HeadObjectCommand } from "@aws-sdk/client-s3"
import { makeS3, s3Client } from "@cairn/server/engine/S3ObjectStore"
import { makeFilesystem, type ObjectStoreShape } from "@cairn/store/ObjectStore"
import { freePort } from "@cairn/testkit/freePort"
import { Effect } from "effect"
import S3rver from "s3rver"

export interface Backend {
  readonly name: "filesystem" | "s3"
  /** Settings for `startApp`. */
  readonly env: Readonly<Record<string, string>>
  /** Whether the blob `sha256` of database `databaseId` is stored. */
  readonly exists: (dataDir: string, databaseId: string, sha256: string) => Effect.Effect<boolean>
  /** When the blob was last written (ms; S3's LastModified has second precision): a rewrite moves it. */
  readonly modified: (dataDir: string, databaseId: string, sha256: string) => Effect.Effect<number>
  /** The store as a server with `dataDir` and `env` uses it (for backups and restores taken beside it). */
  readonly store: (dataDir: string) => ObjectStoreShape
}

export const filesystem: Backend = {
  name: "filesystem",
  env: {},
  exists: (dataDir, databaseId, sha256) => Effect.sync(() => existsSync(join(dataDir, "objects", databaseId, sha256))),
  modified: (dataDir, databaseId, sha256) => Effect.sync(() => statSync(join(dataDir, "objects", databaseId, sha256)).mtimeMs),
  store: (dataDir) => makeFilesystem(join(dataDir, "objects"))
}

/** An s3rver on a free 127.0.0.1 port with one fresh bucket, for the current scope. */
export const s3 = Effect.gen(function* () {
  const port = yield* freePort()
  const bucket = "cairn-objects"
  const server = new S3rver({ port, address: "127.0.0.1", silent: true, directory: mkdtempSync(join(tmpdir(), "cairn-s3rver-")), configureBuckets: [{ name: bucket }] })
  yield* Effect.acquireRelease(Effect.promise(() => server.run()), () => Effect.promise(() => server.close()))
  const endpoint = `http://127.0.0.1:${port}`
  const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" }
  const client = s3Client({ region: "us-east-1", endpoint, forcePathStyle: true, credentials })
  const backend: Backend = {
    name: "s3",
    env: {
      CAIRN_OBJECT_STORE: "s3",
      CAIRN_S3_BUCKET: bucket,
      CAIRN_S3_ENDPOINT: endpoint,
      CAIRN_S3_FORCE_PATH_STYLE: "true",
      CAIRN_S3_ACCESS_KEY_ID: credentials.accessKeyId,
      CAIRN_S3_SECRET_ACCESS_KEY: credentials.secretAccessKey
    },
    exists: (_dataDir, databaseId, sha256) =>
      Effect.promise(() =>
        client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${databaseId}/${sha256}` })).then(
          () => true,
          () => false
        )
      ),
    modified: (_dataDir, databaseId, sha256) =>
      Effect.promise(() => client.send(new HeadObjectCommand({ Bucket: bucket, Key: `${databaseId}/${sha256}` })).then((h) => h.LastModified!.getTime())),
    store: (dataDir) => makeS3({ client, bucket, prefix: "", spoolDir: join(dataDir, "objects-spool") })
  }
  return backend
})
