// Reading the operator's Prometheus endpoint as Prometheus would: GET /metrics, then the text
// parsed by the Prometheus project's own Python client parser (`prometheus_client.parser`, the
// Debian package python3-prometheus-client, installed by .ci/run), never the registry read back
// in process. (The npm text-format parsers mis-read labelled histograms.)
import { spawnSync } from "node:child_process"
import { get } from "node:http"
import { Effect } from "effect"

export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

export interface Family {
  /** The family name as the parser reports it (a counter's without `_total`). */
  readonly name: string
  readonly type: string
  readonly help: string
  readonly samples: ReadonlyArray<Sample>
}

export const scrapeText = (url: string) =>
  Effect.promise(
    () =>
      new Promise<{ status: number; contentType: string; text: string }>((resolve, reject) =>
        get(url, { agent: false }, (response) => {
          let body = ""
          response
            .setEncoding("utf8")
            .on("data", (chunk: string) => (body += chunk))
            .on("end", () => resolve({ status: response.statusCode ?? 0, contentType: String(response.headers["content-type"] ?? ""), text: body }))
        }).on("error", reject)
      )
  )

const parser = `
import json, math, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for f in text_string_to_metric_families(sys.stdin.read()):
    out.append({"name": f.name, "type": f.type, "help": f.documentation,
                "samples": [{"name": s.name, "labels": s.labels, "value": s.value if math.isfinite(s.value) else str(s.value)} for s in f.samples]})
json.dump(out, sys.stdout)
`

/** Parses exposition text; a malformed line fails the parse (and the test). */
export const parse = (text: string): ReadonlyArray<Family> => {
  const run = spawnSync("/usr/bin/python3", ["-c", parser], { input: text, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
  if (run.status !== 0) throw new Error(`the Prometheus parser refused the scrape: ${run.stderr}`)
  return JSON.parse(run.stdout) as ReadonlyArray<Family>
}

export const scrape = (url: string) => Effect.map(scrapeText(url), ({ text }) => parse(text))

const samplesNamed = (families: ReadonlyArray<Family>, name: string) => families.flatMap((f) => f.samples.filter((s) => s.name === name))

const matches = (sample: Sample, labels: Readonly<Record<string, string>>) => Object.entries(labels).every(([k, v]) => sample.labels[k] === v)

/**
 * The sum over the series named `name` matching `labels`: a counter's or gauge's value, or a
 * histogram's observation count (its `_count` series). `NaN` when the endpoint has no such series.
 */
export const total = (families: ReadonlyArray<Family>, name: string, labels: Readonly<Record<string, string>> = {}): number => {
  const direct = samplesNamed(families, name)
  const series = direct.length > 0 ? direct : samplesNamed(families, `${name}_count`)
  if (series.length === 0) return Number.NaN
  return series.filter((s) => matches(s, labels)).reduce((n, s) => n + Number(s.value), 0)
}

/** The sum of a histogram's observed values (its `_sum` series) matching `labels`. */
export const sumOf = (families: ReadonlyArray<Family>, name: string, labels: Readonly<Record<string, string>> = {}): number =>
  samplesNamed(families, `${name}_sum`).filter((s) => matches(s, labels)).reduce((n, s) => n + Number(s.value), 0)

/** Every series name the endpoint exports (with the `_total`, `_count`, `_sum`, `_bucket` suffixes). */
export const seriesNames = (families: ReadonlyArray<Family>): ReadonlySet<string> =>
  new Set(families.flatMap((f) => f.samples.map((s) => s.name)))
