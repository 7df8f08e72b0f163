#!/usr/bin/env node
// One kafkajs consumer-group member, for kafka-sidecar's group tests (tests/integration/test_groups.py).
//
//   node group_consumer.js '<spec json>'
//
// spec: {brokers: ["host:port"], topic, group, sessionMs, heartbeatMs, maxSeconds, clientId}
// Prints JSON lines on stdout: {"event": "assigned", "partitions": [...]} after each join,
// {"event": "record", "partition": p, "offset": o} per message. SIGTERM disconnects (the
// member leaves the group) and prints {"event": "closed"}; SIGKILL is the crash the tests
// use. The process ends by itself after maxSeconds.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const spec = JSON.parse(process.argv[2])
const emit = obj => process.stdout.write(JSON.stringify(obj) + '\n')

async function main() {
  const kafka = new Kafka({
    clientId: spec.clientId || 'group-test-kafkajs',
    brokers: spec.brokers,
    logLevel: spec.debug ? logLevel.DEBUG : logLevel.NOTHING,
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: spec.sessionMs || 3000,
    heartbeatInterval: spec.heartbeatMs || 500,
    rebalanceTimeout: spec.rebalanceMs || 10000,
    maxWaitTimeInMs: 100,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
  })
  consumer.on(consumer.events.GROUP_JOIN, e => {
    const partitions = (e.payload.memberAssignment[spec.topic] || []).slice().sort((a, b) => a - b)
    emit({ event: 'assigned', partitions })
  })
  let closing = false
  const close = async () => {
    if (closing) return
    closing = true
    try {
      await consumer.disconnect()
    } finally {
      emit({ event: 'closed' })
      process.exit(0)
    }
  }
  process.on('SIGTERM', close)
  setTimeout(close, (spec.maxSeconds || 120) * 1000).unref()
  await consumer.connect()
  await consumer.subscribe({ topic: spec.topic, fromBeginning: true })
  await consumer.run({
    autoCommitInterval: 300,
    eachMessage: async ({ partition, message }) => {
      emit({ event: 'record', partition, offset: Number(message.offset) })
    },
  })
}

main().catch(err => {
  process.stderr.write(`group_consumer.js: ${err.stack || err}\n`)
  process.exit(1)
})
