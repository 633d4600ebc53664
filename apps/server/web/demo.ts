/**
 * The demo page's script (bundled by the server with esbuild): signs in with authorization code +
 * PKCE against the development authorization server, then shows projects and tasks from the local
 * IndexedDB copy the browser sync client keeps current, with optimistic create and complete.
 */
import type { SyncScope } from "@cairn/domain/Sync"
import * as BrowserSyncClient from "@cairn/client/BrowserSyncClient"
import { Effect, Exit, Option, Scope, Stream } from "effect"

interface DemoConfig {
  readonly issuer: string
  readonly authorizationEndpoint: string
  readonly tokenEndpoint: string
  readonly clientId: string
  readonly resource: string
  readonly scope: string
}

interface Session {
  readonly token: string
  readonly sub: string
  readonly org: string
  readonly expiresAt: number
}

const sessionKey = "cairn-demo-session"
const pkceKey = "cairn-demo-pkce"

const $ = <E extends HTMLElement>(id: string) => document.getElementById(id) as E

const base64url = (bytes: Uint8Array) => btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
const randomString = () => base64url(crypto.getRandomValues(new Uint8Array(32)))

const claimsOf = (jwt: string): Record<string, unknown> => {
  const part = jwt.split(".")[1] ?? ""
  const json = atob(part.replace(/-/g, "+").replace(/_/g, "/"))
  return JSON.parse(new TextDecoder().decode(Uint8Array.from(json, (c) => c.charCodeAt(0)))) as Record<string, unknown>
}

const redirectUri = () => `${location.origin}/`

const signIn = async (config: DemoConfig) => {
  const verifier = randomString()
  const state = randomString()
  const challenge = base64url(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier))))
  sessionStorage.setItem(pkceKey, JSON.stringify({ verifier, state }))
  const url = new URL(config.authorizationEndpoint)
  url.search = new URLSearchParams({
    client_id: config.clientId,
    response_type: "code",
    redirect_uri: redirectUri(),
    scope: config.scope,
    resource: config.resource,
    code_challenge: challenge,
    code_challenge_method: "S256",
    // Always ask who: signing out here does not end the authorization server's session.
    prompt: "login",
    state
  }).toString()
  location.assign(url.toString())
}

/** Finishes a sign-in the authorization server redirected back from, if any. */
const finishSignIn = async (config: DemoConfig): Promise<string | undefined> => {
  const params = new URLSearchParams(location.search)
  if (!params.has("code") && !params.has("error")) return undefined
  history.replaceState(null, "", "/")
  const pkce = JSON.parse(sessionStorage.getItem(pkceKey) ?? "null") as { verifier: string; state: string } | null
  sessionStorage.removeItem(pkceKey)
  if (params.has("error")) return `Sign-in failed: ${params.get("error_description") ?? params.get("error")}`
  if (pkce === null || params.get("state") !== pkce.state) return "Sign-in failed: the answer does not match the request; sign in again."
  const response = await fetch(config.tokenEndpoint, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code")!,
      redirect_uri: redirectUri(),
      client_id: config.clientId,
      code_verifier: pkce.verifier,
      resource: config.resource
    })
  })
  const body = (await response.json()) as { access_token?: string; error_description?: string; error?: string }
  if (!response.ok || body.access_token === undefined) return `Sign-in failed: ${body.error_description ?? body.error ?? response.status}`
  const claims = claimsOf(body.access_token)
  const session: Session = {
    token: body.access_token,
    sub: String(claims["sub"]),
    org: String(claims["org"] ?? ""),
    expiresAt: Number(claims["exp"] ?? 0) * 1000
  }
  localStorage.setItem(sessionKey, JSON.stringify(session))
  return undefined
}

const currentSession = (): Session | undefined => {
  const session = JSON.parse(localStorage.getItem(sessionKey) ?? "null") as Session | null
  return session !== null && session.expiresAt > Date.now() + 10_000 ? session : undefined
}

const scope: SyncScope = {
  entities: [{ from: { kind: "entity", name: "Project" } }, { from: { kind: "entity", name: "Task" } }]
}

const el = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: { readonly [property: string]: unknown } = {},
  ...children: Array<Node | string>
): HTMLElementTagNameMap[K] => {
  const node: HTMLElementTagNameMap[K] = Object.assign(document.createElement(tag), props)
  node.append(...children)
  return node
}

const byName = (a: BrowserSyncClient.ViewRow, b: BrowserSyncClient.ViewRow, field: string) =>
  String(a.record[field] ?? "").localeCompare(String(b.record[field] ?? "")) || a.id.localeCompare(b.id)

const start = (session: Session) =>
  Effect.gen(function* () {
    const client = yield* BrowserSyncClient.make({
      baseUrl: location.origin,
      token: Effect.sync(() => currentSession()?.token ?? session.token),
      scope,
      identityKey: `${session.sub}@${session.org}`,
      name: "cairn-demo"
    })
    const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runFork(effect)
    let projects: ReadonlyArray<BrowserSyncClient.ViewRow> = []
    let tasks: ReadonlyArray<BrowserSyncClient.ViewRow> = []
    let selected = sessionStorage.getItem("cairn-demo-project") ?? undefined

    const renderProjects = () => {
      if (selected === undefined || !projects.some((p) => p.id === selected)) selected = projects.find((p) => !p.pending)?.id
      const list = $("projects")
      list.replaceChildren(
        ...[...projects].sort((a, b) => byName(a, b, "name")).map((p) => {
          const current = p.id === selected
          const button = el("button", { type: "button", className: "link", disabled: p.pending }, String(p.record["name"]))
          button.addEventListener("click", () => {
            selected = p.id
            sessionStorage.setItem("cairn-demo-project", p.id)
            renderProjects()
            renderTasks()
          })
          const item = el("li", {}, button, ...(p.pending ? [el("span", { className: "pending" }, "(saving…)")] : []))
          item.dataset["id"] = p.id
          item.dataset["pending"] = String(p.pending)
          if (current) item.setAttribute("aria-current", "true")
          return item
        })
      )
      renderTasks()
    }

    const renderTasks = () => {
      const project = projects.find((p) => p.id === selected)
      $("tasks-heading").textContent = project ? `Tasks in ${String(project.record["name"])}` : "Tasks"
      $("tasks-hint").hidden = project !== undefined
      $("new-task").hidden = project === undefined
      const shown = project === undefined ? [] : tasks.filter((t) => t.record["projectId"] === project.id)
      $("tasks").replaceChildren(
        ...[...shown].sort((a, b) => byName(a, b, "title")).map((t) => {
          const done = t.record["status"] === "done"
          const box = el("input", { type: "checkbox", checked: done, disabled: t.id.startsWith("pending:") })
          box.setAttribute("aria-label", `Done: ${String(t.record["title"])}`)
          box.addEventListener("change", () =>
            run(
              client.mutate({
                entity: "Task",
                operation: done ? "reopen" : "complete",
                target: t.id,
                input: {},
                optimistic: { _tag: "Update", entity: "Task", id: t.id, patch: { status: done ? "open" : "done" } }
              })
            )
          )
          const item = el(
            "li",
            { className: done ? "done" : "" },
            box,
            el("span", { className: "title" }, String(t.record["title"])),
            ...(t.pending ? [el("span", { className: "pending" }, "(saving…)")] : [])
          )
          item.dataset["id"] = t.id
          item.dataset["pending"] = String(t.pending)
          item.dataset["status"] = String(t.record["status"])
          return item
        })
      )
    }

    $<HTMLFormElement>("new-project").addEventListener("submit", (event) => {
      event.preventDefault()
      const input = $<HTMLInputElement>("project-name")
      const name = input.value.trim()
      if (name === "") return
      input.value = ""
      run(client.mutate({ entity: "Project", operation: "create", input: { name }, optimistic: { _tag: "Create", entity: "Project", record: { name, archived: false } } }))
    })
    $<HTMLFormElement>("new-task").addEventListener("submit", (event) => {
      event.preventDefault()
      const input = $<HTMLInputElement>("task-title")
      const title = input.value.trim()
      if (title === "" || selected === undefined) return
      input.value = ""
      run(
        client.mutate({
          entity: "Task",
          operation: "create",
          input: { projectId: selected, title },
          optimistic: { _tag: "Create", entity: "Task", record: { projectId: selected, title, status: "open" } }
        })
      )
    })

    yield* Effect.forkScoped(Stream.runForEach(client.view("Project"), (rows) => Effect.sync(() => ((projects = rows), renderProjects()))))
    yield* Effect.forkScoped(Stream.runForEach(client.view("Task"), (rows) => Effect.sync(() => ((tasks = rows), renderTasks()))))
    yield* Effect.forkScoped(
      Stream.runForEach(client.rejected, (entries) =>
        Effect.sync(() =>
          $("rejections").replaceChildren(
            ...entries.map((e) => {
              const dismiss = el("button", { type: "button" }, "Dismiss")
              dismiss.addEventListener("click", () => run(client.dismiss(e.invocationId)))
              return el("p", {}, `Not saved: ${e.reason ?? "rejected"} `, dismiss)
            })
          )
        )
      )
    )
    const describe = () =>
      Effect.gen(function* () {
        const role = yield* client.role.get
        const status = yield* client.status.get
        const stopped = yield* client.stopped.get
        const text = Option.isSome(stopped)
          ? `Sync stopped (${stopped.value}). Sign out and sign in again.`
          : role === "leader"
            ? status.confirmed
              ? "Live: this tab syncs for every open tab."
              : "Showing the local copy; connecting…"
            : "Live: another tab syncs; this one reads the shared local copy."
        $("sync-status").textContent = text
        document.body.dataset["role"] = role
        document.body.dataset["confirmed"] = String(status.confirmed)
      })
    yield* Effect.forkScoped(
      Stream.runForEach(Stream.mergeAll([client.role.changes, client.status.changes, client.stopped.changes] as ReadonlyArray<Stream.Stream<unknown>>, { concurrency: "unbounded" }), () => describe())
    )
  })

const main = async () => {
  const config = (await (await fetch("/demo-config.json")).json()) as DemoConfig
  const problem = await finishSignIn(config)
  const session = currentSession()
  const signInButton = $<HTMLButtonElement>("sign-in")
  const signOutButton = $<HTMLButtonElement>("sign-out")
  signInButton.addEventListener("click", () => void signIn(config))
  // Signing in or out in another tab changes whose data this tab may show: start over.
  addEventListener("storage", (event) => {
    if (event.key === sessionKey) location.reload()
  })
  signOutButton.addEventListener("click", () => {
    localStorage.removeItem(sessionKey)
    location.reload()
  })
  if (session === undefined) {
    $("who").textContent = problem ?? "Not signed in."
    signInButton.hidden = false
    return
  }
  $("who").textContent = `Signed in as ${session.sub} (org ${session.org}).`
  signOutButton.hidden = false
  $("app").hidden = false
  const scope = Effect.runSync(Scope.make())
  addEventListener("pagehide", () => void Effect.runFork(Scope.close(scope, Exit.void)))
  Effect.runFork(
    start(session).pipe(
      Scope.extend(scope),
      Effect.catchAllCause((cause) => Effect.sync(() => ($("sync-status").textContent = `The local copy cannot be opened: ${String(cause)}`)))
    )
  )
}

void main()
