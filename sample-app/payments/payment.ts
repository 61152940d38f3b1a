/** A charge recorded in the ledger. `amount` is in minor units (cents). */
export interface Payment {
  id: string;
  amount: number;
  currency: string;
  createdAt: string;
}
