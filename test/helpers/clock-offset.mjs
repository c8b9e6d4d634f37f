// Loaded with `node --import` into a command the tests run (NODE_OPTIONS): its clock is
// OPENBOOK_TEST_CLOCK_OFFSET_MS off the machine's (negative: behind), as `faketime` would set it.
// Only Date moves; timers and the database's clock do not.
const offset = Number(process.env.OPENBOOK_TEST_CLOCK_OFFSET_MS ?? 0)
const SystemDate = Date

globalThis.Date = class OffsetDate extends SystemDate {
  constructor(...args) {
    if (args.length === 0) super(SystemDate.now() + offset)
    else super(...args)
  }

  static now() {
    return SystemDate.now() + offset
  }
}
