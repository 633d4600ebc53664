// The `files` fixture served as `npm start` serves the tracker: an entry point for tests
// that run the server as a real child process (SIGKILL, memory of the server alone).
import { NodeRuntime } from "@effect/platform-node"
import { filesDeployment } from "@cairn/testkit/fixture/files"
import { serveDeployment } from "../../src/Serve.js"

NodeRuntime.runMain(serveDeployment(filesDeployment), { disablePrettyLogger: true })
