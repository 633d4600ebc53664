/**
 * The deployment's object store, chosen by `CAIRN_OBJECT_STORE`: `filesystem` (the
 * embedded default, `<CAIRN_OBJECT_DIR>/<database id>/<sha256>`, by default `<dataDir>/objects`;
 * processes of a cluster on one machine share one directory) or `s3` (an S3-compatible
 * bucket: `CAIRN_S3_BUCKET`, `CAIRN_S3_REGION`, optional `CAIRN_S3_ENDPOINT`,
 * `CAIRN_S3_FORCE_PATH_STYLE`, `CAIRN_S3_PREFIX`, and `CAIRN_S3_ACCESS_KEY_ID` /
 * `CAIRN_S3_SECRET_ACCESS_KEY`, else the SDK's default credential chain).
 */
import { join } from "node:path"
import { makeFilesystem, ObjectStore } from "@cairn/store/ObjectStore"
import { Config, Effect, Layer, Option, Redacted } from "effect"
import { Settings } from "../operations/Settings.js"

const s3Config = Config.all({
  bucket: Config.string("CAIRN_S3_BUCKET"),
  region: Config.string("CAIRN_S3_REGION").pipe(Config.withDefault("us-east-1")),
  endpoint: Config.option(Config.string("CAIRN_S3_ENDPOINT")),
  forcePathStyle: Config.boolean("CAIRN_S3_FORCE_PATH_STYLE").pipe(Config.withDefault(false)),
  prefix: Config.string("CAIRN_S3_PREFIX").pipe(Config.withDefault("")),
  accessKeyId: Config.option(Config.string("CAIRN_S3_ACCESS_KEY_ID")),
  secretAccessKey: Config.option(Config.redacted("CAIRN_S3_SECRET_ACCESS_KEY"))
})

export const ObjectStoreLive = Layer.scoped(
  ObjectStore,
  Effect.gen(function* () {
    const settings = yield* Settings
    const backend = yield* Config.literal("filesystem", "s3")("CAIRN_OBJECT_STORE").pipe(Config.withDefault("filesystem"))
    if (backend === "filesystem") {
      // Several processes share one directory in cluster mode (the archive and uploads live there).
      const root = yield* Config.string("CAIRN_OBJECT_DIR").pipe(Config.withDefault(join(settings.dataDir, "objects")))
      return makeFilesystem(root)
    }
    const s3 = yield* s3Config
    // Loaded only when configured: the S3 SDK is a large part of the server's startup otherwise.
    const { makeS3, s3Client } = yield* Effect.promise(() => import("./S3ObjectStore.js"))
    const credentials =
      Option.isSome(s3.accessKeyId) && Option.isSome(s3.secretAccessKey)
        ? { accessKeyId: s3.accessKeyId.value, secretAccessKey: Redacted.value(s3.secretAccessKey.value) }
        : undefined
    const client = s3Client({ region: s3.region, endpoint: Option.getOrUndefined(s3.endpoint), forcePathStyle: s3.forcePathStyle, credentials })
    yield* Effect.addFinalizer(() => Effect.sync(() => client.destroy()))
    return makeS3({ client, bucket: s3.bucket, prefix: s3.prefix, spoolDir: join(settings.dataDir, "objects-spool") })
  })
)
