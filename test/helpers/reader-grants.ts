import { EARLIER_RELEASE_READER_PRIVILEGES, FOLDER_PRIVILEGES } from '../../src/store/schema/access.js'
import { READER_PRIVILEGES, type ReaderPrivilege } from '../../src/store/schema/reader-privileges.js'

/** Every privilege the migrations grant openbook_reader, sorted by kind and object. */
export const MIGRATED_READER_PRIVILEGES: readonly ReaderPrivilege[] = [
  ...READER_PRIVILEGES,
  ...EARLIER_RELEASE_READER_PRIVILEGES,
  ...FOLDER_PRIVILEGES,
].sort((x, y) => (x.kind === y.kind ? (x.object < y.object ? -1 : 1) : x.kind < y.kind ? -1 : 1))
