import type { Command } from 'commander';

/** Placeholder: replaced by the admin commands. */
export function registerAdminCommands(_program: Command, _io: { out: (s: string) => void; err: (s: string) => void }): void {}
