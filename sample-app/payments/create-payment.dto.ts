import { BadRequestException } from '@nestjs/common';

/** Body of `POST /payments`: `amount` in minor units (a positive integer), `currency` an ISO 4217 code. */
export interface CreatePaymentDto {
  amount: number;
  currency: string;
}

/** Validates the raw body by hand; anything else is a 400. */
export function parseCreatePayment(body: unknown): CreatePaymentDto {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestException('body must be a JSON object { amount, currency }');
  }
  const { amount, currency } = body as Record<string, unknown>;
  if (typeof amount !== 'number' || !Number.isSafeInteger(amount) || amount <= 0) {
    throw new BadRequestException('amount must be a positive integer (minor units, e.g. cents)');
  }
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) {
    throw new BadRequestException('currency must be a three-letter ISO 4217 code, e.g. "EUR"');
  }
  return { amount, currency };
}
