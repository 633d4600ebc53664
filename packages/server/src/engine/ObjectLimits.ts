/**
 * The operator's limits on stored files: the largest object, the bytes one database may
 * hold, the content types accepted, and how long upload handles, signed links and
 * unreferenced objects live. Defaults protect a multi-tenant deployment.
 */
import { positiveInteger } from "@cairn/domain/PositiveSetting"
import { Config, Context, Duration, Layer } from "effect"

export interface ObjectLimitsShape {
  /** Largest accepted object, in bytes. */
  readonly maxObjectBytes: number
  /** Bytes of objects one database may hold (after de-duplication). */
  readonly quotaBytes: number
  /** Accepted content types (`type/subtype`, or `type/*`); `*` accepts any well-formed type. */
  readonly contentTypes: ReadonlyArray<string>
  /** How long an upload handle may be attached. */
  readonly uploadTtl: Duration.Duration
  /** How long a signed download link works. */
  readonly linkTtl: Duration.Duration
  /** How long an unreferenced object is kept (past its upload handle's life) before it is collected. */
  readonly retention: Duration.Duration
  /** How often the collector removes unreferenced objects. */
  readonly collectEvery: Duration.Duration
  /** Largest file `mutate` accepts inline (MCP agents): base64 content in place of an upload handle. */
  readonly inlineMaxBytes: number
  /** Unfinished resumable uploads one caller may hold in a database at once. */
  readonly unfinishedPerPrincipal: number
  /** Unfinished resumable uploads a database may hold at once, all callers together. */
  readonly unfinishedPerDatabase: number
}

/**
 * Types a browser never runs: raster images, PDF, plain text and data, archives, audio and video, office
 * documents, and `application/octet-stream` (what an unlabelled file is, served as bytes to save). Not
 * HTML, SVG, XML or scripts: a tenant's file must never become a page or script of this origin, whatever
 * header a future browser or proxy ignores (downloads are also attachments with nosniff and a sandbox CSP).
 */
export const passiveContentTypes: ReadonlyArray<string> = [
  "image/png",
  "image/jpeg",
  "image/gif",
  "image/webp",
  "image/avif",
  "application/pdf",
  "text/plain",
  "text/csv",
  "text/markdown",
  "application/json",
  "application/zip",
  "application/gzip",
  "application/octet-stream",
  "audio/*",
  "video/*",
  "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  "application/vnd.oasis.opendocument.text",
  "application/vnd.oasis.opendocument.spreadsheet"
]

export const defaultObjectLimits: ObjectLimitsShape = {
  // One tenant's file or folder of files must not fill the disk (or bucket) every tenant shares: a
  // 100 MiB file and 1 GiB per database until measured workloads say otherwise (spec: Limits rule 2).
  maxObjectBytes: 100 * 1024 * 1024,
  quotaBytes: 1024 * 1024 * 1024,
  contentTypes: passiveContentTypes,
  uploadTtl: Duration.hours(1),
  linkTtl: Duration.minutes(5),
  retention: Duration.hours(24),
  collectEvery: Duration.minutes(10),
  // Its base64 (4/3 larger) stays within the JSON string bound of a request.
  inlineMaxBytes: 48 * 1024,
  // Each holds its declared bytes of the quota and two files on disk until it finishes or expires.
  unfinishedPerPrincipal: 8,
  unfinishedPerDatabase: 64
}

const positive = (name: string, fallback: number, unit = "bytes") => positiveInteger(name, unit).pipe(Config.withDefault(fallback))

export const objectLimitsConfig: Config.Config<ObjectLimitsShape> = Config.all({
  maxObjectBytes: positive("CAIRN_OBJECT_MAX_BYTES", defaultObjectLimits.maxObjectBytes),
  quotaBytes: positive("CAIRN_OBJECT_QUOTA_BYTES", defaultObjectLimits.quotaBytes),
  contentTypes: Config.string("CAIRN_OBJECT_CONTENT_TYPES").pipe(
    Config.withDefault(passiveContentTypes.join(",")),
    Config.map((s) => s.split(",").map((t) => t.trim().toLowerCase()).filter((t) => t !== ""))
  ),
  uploadTtl: Config.duration("CAIRN_OBJECT_UPLOAD_TTL").pipe(Config.withDefault(defaultObjectLimits.uploadTtl)),
  linkTtl: Config.duration("CAIRN_OBJECT_LINK_TTL").pipe(Config.withDefault(defaultObjectLimits.linkTtl)),
  retention: Config.duration("CAIRN_OBJECT_RETENTION").pipe(Config.withDefault(defaultObjectLimits.retention)),
  collectEvery: Config.duration("CAIRN_OBJECT_COLLECT_EVERY").pipe(Config.withDefault(defaultObjectLimits.collectEvery)),
  inlineMaxBytes: positive("CAIRN_OBJECT_INLINE_MAX_BYTES", defaultObjectLimits.inlineMaxBytes),
  unfinishedPerPrincipal: positive("CAIRN_OBJECT_UNFINISHED_PER_PRINCIPAL", defaultObjectLimits.unfinishedPerPrincipal, "uploads"),
  unfinishedPerDatabase: positive("CAIRN_OBJECT_UNFINISHED_PER_DATABASE", defaultObjectLimits.unfinishedPerDatabase, "uploads")
})

export class ObjectLimits extends Context.Tag("@cairn/server/ObjectLimits")<ObjectLimits, ObjectLimitsShape>() {
  static readonly layer = (limits: Partial<ObjectLimitsShape> = {}) => Layer.succeed(ObjectLimits, { ...defaultObjectLimits, ...limits })
  static readonly layerConfig = Layer.effect(ObjectLimits, objectLimitsConfig)
}
