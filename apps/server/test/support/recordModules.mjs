// Preloaded into a server child (`--import`) to record every module it loads: one URL per line in
// the file `CAIRN_TEST_MODULES_FILE` names. Registered after tsx, so its hooks see every resolution.
import { register } from "node:module"

if (process.env.CAIRN_TEST_MODULES_FILE) {
  register("./recordModulesHooks.mjs", import.meta.url, { data: { file: process.env.CAIRN_TEST_MODULES_FILE } })
}
