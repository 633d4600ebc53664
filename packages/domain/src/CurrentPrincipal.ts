/**
 * The verified caller of the request being served. Transports provide it after
 * authentication; handlers read it instead of trusting anything in the request.
 */
import { Context } from "effect"
import type { Principal } from "./Principal.js"

export class CurrentPrincipal extends Context.Tag("@cairn/domain/CurrentPrincipal")<CurrentPrincipal, Principal>() {}
