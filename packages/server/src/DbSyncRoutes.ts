/**
 * `/db/sync` as the deployment serves it: sync's routes behind the same gate as the
 * rest of `/db`, each principal's view from the deployment's policy. Its changes stream
 * stays open for as long as the client listens (the front's request timeout bounds only
 * the time to the response head).
 */
import { Sync, SyncConfig, SyncHandlers, SyncRoutes } from "@cairn/sync"
import { Effect, Layer } from "effect"
import { DbAuthentication, DbGate } from "./DbGate.js"
import { Deployment } from "./Deployment.js"

const Handlers = Layer.unwrapEffect(
  Effect.map(Deployment, ({ policy }) => SyncHandlers({ view: (principal) => policy.view(principal) }))
).pipe(Layer.provide(Sync.Default), Layer.provide(SyncConfig.layerConfig))

/** Needs `Databases`, `Sealer`, `Deployment`, `Identity` and `Limits` (see `EngineLive`). */
export const DbSyncRoutes = SyncRoutes.pipe(Layer.provide([Handlers, DbAuthentication, DbGate.layer]))
