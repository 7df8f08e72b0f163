#!/usr/bin/env node
// kafkajs driver for kafka-sidecar's integration tests (tests/integration/test_kcat_kafkajs.py).
//
//   node roundtrip.js produce <spec.json>   one producer.send() per entry of spec.sends
//   node roundtrip.js admin <spec.json>     run spec.ops in order with one admin client
//
// Binary data travels as base64 (null stays null). The result is one JSON document on
// stdout; the exit status is 0 when every step ran (admin op errors are reported in
// the JSON, not as a failure, so the test can assert on them), 1 on a fatal error.
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const b64 = s => (s === null || s === undefined ? s : Buffer.from(s, 'base64'))

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

function client(spec) {
  return new Kafka({
    clientId: spec.clientId || 'sidecar-kafkajs-test',
    brokers: spec.brokers,
    logLevel: spec.debug ? logLevel.DEBUG : logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
  })
}

// Headers arrive as [[key, base64 | null], ...]; kafkajs takes an object whose values may
// be arrays (one header per element, in order), so repeated keys are grouped.
function toHeaders(pairs) {
  const out = {}
  for (const [k, v] of pairs || []) {
    const value = b64(v)
    if (Object.prototype.hasOwnProperty.call(out, k)) {
      out[k] = Array.isArray(out[k]) ? [...out[k], value] : [out[k], value]
    } else {
      out[k] = value
    }
  }
  return out
}

function toMessage(m) {
  const msg = { key: b64(m.key), value: b64(m.value), headers: toHeaders(m.headers) }
  if (m.partition !== undefined && m.partition !== null) msg.partition = m.partition
  if (m.timestamp !== undefined && m.timestamp !== null) msg.timestamp = String(m.timestamp)
  return msg
}

async function produce(spec) {
  const producer = client(spec).producer({ allowAutoTopicCreation: false, idempotent: !!spec.idempotent })
  await producer.connect()
  const results = []
  try {
    for (const send of spec.sends) {
      const metadata = await producer.send({
        topic: send.topic,
        acks: send.acks === undefined ? -1 : send.acks,
        compression: COMPRESSION[send.compression || 'none'],
        messages: send.messages.map(toMessage),
      })
      results.push(metadata)
    }
  } finally {
    await producer.disconnect()
  }
  return { results }
}

const ADMIN_OPS = {
  createTopics: (admin, args) => admin.createTopics(args),
  listTopics: admin => admin.listTopics(),
  fetchTopicMetadata: (admin, args) => admin.fetchTopicMetadata(args),
  fetchTopicOffsets: (admin, args) => admin.fetchTopicOffsets(args.topic),
  fetchTopicOffsetsByTimestamp: (admin, args) => admin.fetchTopicOffsetsByTimestamp(args.topic, args.timestamp),
  deleteTopics: (admin, args) => admin.deleteTopics(args),
}

// KafkaJSAggregateError (e.g. from createTopics) carries the per-topic errors in `errors`.
function describeError(e) {
  return {
    name: e.name,
    type: e.type || null,
    message: e.message,
    errors: Array.isArray(e.errors) ? e.errors.map(describeError) : [],
  }
}

async function runAdmin(spec) {
  const admin = client(spec).admin()
  await admin.connect()
  const results = []
  try {
    for (const { op, args } of spec.ops) {
      const fn = ADMIN_OPS[op]
      if (!fn) throw new Error(`unknown admin op ${op}`)
      try {
        const value = await fn(admin, args || {})
        results.push({ op, ok: true, value: value === undefined ? null : value })
      } catch (e) {
        results.push({ op, ok: false, error: describeError(e) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  return { results }
}

async function main() {
  const [command, specPath] = process.argv.slice(2)
  const spec = JSON.parse(fs.readFileSync(specPath, 'utf8'))
  let out
  if (command === 'produce') out = await produce(spec)
  else if (command === 'admin') out = await runAdmin(spec)
  else throw new Error(`unknown command ${command}; use produce or admin`)
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().then(
  () => process.exit(0),
  e => {
    process.stderr.write(`roundtrip.js: ${e && e.stack ? e.stack : e}\n`)
    process.exit(1)
  }
)
