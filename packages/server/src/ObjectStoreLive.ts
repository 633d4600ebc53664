/**
 * The deployment's object store: the filesystem under the data directory
 * (`<dataDir>/objects/<database id>/<sha256>`), the embedded default.
 */
import { join } from "node:path"
import { makeFilesystem, ObjectStore } from "@cairn/store/ObjectStore"
import { Effect, Layer } from "effect"
import { Settings } from "./Settings.js"

export const ObjectStoreLive = Layer.effect(
  ObjectStore,
  Effect.map(Settings, (settings) => makeFilesystem(join(settings.dataDir, "objects")))
)
