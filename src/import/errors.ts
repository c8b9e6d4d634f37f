import { OperatorError } from '../operator-error.js'

/** A line the import refuses, named by line (and field): nothing of the input is written. */
export class ImportError extends OperatorError {}
