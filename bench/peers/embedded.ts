export const EMBEDDED_SYSTEMS: Array<{ name: string }> = [];
export async function embeddedRun(..._a: unknown[]): Promise<void> {}
