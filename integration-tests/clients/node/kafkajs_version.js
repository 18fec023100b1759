// Loads kafkajs from the installed node_modules (NODE_PATH) and checks it
// is the version package.json pins: proves the npm install path. There is
// no Kafka listener yet, so nothing connects.
'use strict';

const pinned = require('./package.json').dependencies.kafkajs;
const installed = require('kafkajs/package.json').version;
const { Kafka } = require('kafkajs');

if (typeof Kafka !== 'function') {
  console.error('kafkajs did not export the Kafka class');
  process.exit(1);
}
if (installed !== pinned) {
  console.error(`kafkajs ${installed} is installed, package.json pins ${pinned}`);
  process.exit(1);
}
console.log(`kafkajs ${installed}`);
