/** Isolation level of the library's transaction. */
export type TransactionIsolation = 'read committed' | 'repeatable read' | 'serializable';

/** The accepted isolation levels; the first is the default. */
export const TRANSACTION_ISOLATIONS: readonly TransactionIsolation[] = ['read committed', 'repeatable read', 'serializable'];

/** Checks `transaction` and `isolation` as given to a decorator or `run()`; returns the problems, one per option. */
export function transactionOptionProblems(options: { transaction?: unknown; isolation?: unknown }): string[] {
  const problems: string[] = [];
  if (options.transaction !== undefined && typeof options.transaction !== 'boolean') {
    problems.push(`transaction: expected true or false, got ${JSON.stringify(options.transaction)}`);
  }
  if (options.isolation !== undefined) {
    if (!TRANSACTION_ISOLATIONS.includes(options.isolation as TransactionIsolation)) {
      problems.push(`isolation: expected one of ${TRANSACTION_ISOLATIONS.map((i) => `"${i}"`).join(', ')}, got ${JSON.stringify(options.isolation)}`);
    } else if (options.transaction !== true) {
      problems.push('isolation: only applies with transaction: true; add transaction: true or remove isolation');
    }
  }
  return problems;
}
