/**
 * Cairn's entry point (`npm start`): the tracker deployment (root schema `tracker`, its policy
 * and handlers, one database per verified `org`), served until SIGINT or SIGTERM; the same as
 * `cairn serve` without `--app`, plus the demo page at `/`. Settings problems are listed together on stderr (exit 2).
 */
// A module subpath: the package's barrel loads its HTTP client (undici) and cluster modules at startup.
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { trackerDeployment } from "@cairn/tracker/application"
import { DemoPage } from "./DemoPage.js"
import { serveDeployment } from "./Serve.js"

// The logger is the operator's choice (CAIRN_LOG_FORMAT), installed by `launch`.
NodeRuntime.runMain(serveDeployment(trackerDeployment, DemoPage), { disablePrettyLogger: true })
