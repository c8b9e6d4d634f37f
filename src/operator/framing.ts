import { Transform, type TransformCallback } from 'node:stream'

/** Forwarded input as frames: each chunk as a 4-byte big-endian length + bytes, then an empty frame. */

export class InputCutShortError extends Error {
  constructor() {
    super('the input ended before its end-of-input marker (the client went away): nothing was imported')
  }
}

/** Frames a byte stream: each chunk as length + bytes, then the empty end-of-input frame. */
export class InputFramer extends Transform {
  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (chunk.length === 0) {
      done()
      return
    }
    const length = Buffer.alloc(4)
    length.writeUInt32BE(chunk.length)
    this.push(length)
    done(null, chunk)
  }

  override _flush(done: TransformCallback): void {
    done(null, Buffer.alloc(4))
  }
}

/** Reads frames back into the bytes they carry; ends at the end-of-input marker only. */
export class InputUnframer extends Transform {
  #pending: Buffer = Buffer.alloc(0)
  #ended = false

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.#ended) {
      done()
      return
    }
    this.#pending = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk
    while (this.#pending.length >= 4) {
      const length = this.#pending.readUInt32BE(0)
      if (length === 0) {
        this.#ended = true
        this.#pending = Buffer.alloc(0)
        this.push(null)
        done()
        return
      }
      if (this.#pending.length < 4 + length) break
      this.push(this.#pending.subarray(4, 4 + length))
      this.#pending = this.#pending.subarray(4 + length)
    }
    done()
  }

  override _flush(done: TransformCallback): void {
    done(this.#ended ? null : new InputCutShortError())
  }

  get complete(): boolean {
    return this.#ended
  }
}
