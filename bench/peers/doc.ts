export async function writeDocument(..._a: unknown[]): Promise<void> {}
