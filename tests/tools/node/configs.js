#!/usr/bin/env node
// kafkajs admin config calls for kafka-sidecar's integration tests (tests/integration/test_configs.py).
//
//   node configs.js <spec.json>
//
// spec: { brokers: ["127.0.0.1:9092"], ops: [{ op: "describeConfigs" | "alterConfigs", args: {...} }] }
// args are passed to kafkajs as they are (resource types as numbers: 2 = TOPIC, 4 = BROKER).
// The result is one JSON document on stdout: { results: [{ op, ok, value | error }] }; the exit
// status is 0 when every op ran (op errors are reported in the JSON), 1 on a fatal error.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const OPS = {
  describeConfigs: (admin, args) => admin.describeConfigs(args),
  alterConfigs: (admin, args) => admin.alterConfigs(args),
}

function describeError(e) {
  return { name: e.name, type: e.type || null, message: e.message }
}

async function main() {
  const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'))
  const kafka = new Kafka({
    clientId: 'sidecar-kafkajs-configs',
    brokers: spec.brokers,
    logLevel: spec.debug ? logLevel.DEBUG : logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 1, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const admin = kafka.admin()
  await admin.connect()
  const results = []
  try {
    for (const { op, args } of spec.ops) {
      const fn = OPS[op]
      if (!fn) throw new Error(`unknown op ${op}`)
      try {
        results.push({ op, ok: true, value: (await fn(admin, args)) ?? null })
      } catch (e) {
        results.push({ op, ok: false, error: describeError(e) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(JSON.stringify({ results }) + '\n')
}

main().then(
  () => process.exit(0),
  e => {
    process.stderr.write(`configs.js: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
  }
)
