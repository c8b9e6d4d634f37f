#!/usr/bin/env node
import '../dist/sync/main.js'
