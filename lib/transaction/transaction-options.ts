/** Isolation level of the library's transaction. */
export type TransactionIsolation = 'read committed' | 'repeatable read' | 'serializable';

/** The accepted isolation levels; the first is the default. */
export const TRANSACTION_ISOLATIONS: readonly TransactionIsolation[] = ['read committed', 'repeatable read', 'serializable'];

/** The transactional mode as resolved: off, or on with an isolation level. */
export type TransactionSetting = false | { isolation: TransactionIsolation };

/**
 * Resolves `transaction` and `isolation` over `inherited` (the module's setting, for a route): the value and the
 * problems, one per option.
 */
export function resolveTransactionSetting(
  options: { transaction?: unknown; isolation?: unknown },
  inherited: TransactionSetting = false,
): { value: TransactionSetting; problems: { option: 'transaction' | 'isolation'; message: string }[] } {
  const problems: { option: 'transaction' | 'isolation'; message: string }[] = [];
  const { transaction, isolation } = options;
  if (transaction !== undefined && typeof transaction !== 'boolean') {
    problems.push({ option: 'transaction', message: `expected true or false, got ${JSON.stringify(transaction)}` });
  }
  const on = transaction === undefined ? inherited !== false : transaction === true;
  if (isolation !== undefined) {
    if (!TRANSACTION_ISOLATIONS.includes(isolation as TransactionIsolation)) {
      problems.push({ option: 'isolation', message: `expected one of ${TRANSACTION_ISOLATIONS.map((i) => `"${i}"`).join(', ')}, got ${JSON.stringify(isolation)}` });
    } else if (!on) {
      problems.push({ option: 'isolation', message: 'only applies with transaction: true; add transaction: true or remove isolation' });
    }
  }
  if (!on || problems.length > 0) return { value: false, problems };
  const level = (isolation as TransactionIsolation | undefined) ?? (inherited ? inherited.isolation : TRANSACTION_ISOLATIONS[0]);
  return { value: { isolation: level }, problems };
}

/** Checks `transaction` and `isolation` as given to a decorator or `run()`; returns the problems as `option: message`. */
export function transactionOptionProblems(options: { transaction?: unknown; isolation?: unknown }): string[] {
  return resolveTransactionSetting(options).problems.map((p) => `${p.option}: ${p.message}`);
}
