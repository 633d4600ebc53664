// s3rver ships no types: the part of its API the tests use.
declare module "s3rver" {
  export default class S3rver {
    constructor(options: {
      readonly port?: number
      readonly address?: string
      readonly silent?: boolean
      readonly directory: string
      readonly configureBuckets?: ReadonlyArray<{ readonly name: string }>
    })
    run(): Promise<{ address: string; port: number }>
    close(): Promise<void>
  }
}
