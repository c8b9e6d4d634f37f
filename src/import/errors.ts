import { OperatorError } from '../operator/errors.js'

/** A line the import refuses, named by line (and field): nothing of the input is written. */
export class ImportError extends OperatorError {}
