/** The tracker as one application: root schema, policy and handlers, ready to deploy. */
import { trackerHandlers } from "./handlers.js"
import { trackerPolicy } from "./policy.js"
import { tracker } from "./tracker.js"

export const trackerApplication = { root: tracker, policy: trackerPolicy, handlers: trackerHandlers } as const

/**
 * The tracker deployed as `npm start` serves it: one database per verified `org` claim. Its keys
 * are the bare `org` value (`legacyKeys`): data directories written before keys were namespaced stay readable.
 */
export const trackerDeployment = {
  ...trackerApplication,
  databases: [{ name: "tenants", schema: "tracker", keyClaim: "org", legacyKeys: true }]
} as const
