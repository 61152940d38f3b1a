import { Injectable } from '@nestjs/common';
import { SCHEDULED_METADATA } from './schedule.constants';
import type { ScheduledMetadata } from './scheduled.decorator';

/** The one place that reads `@Scheduled()` metadata. */
@Injectable()
export class ScheduleMetadataAccessor {
  /** The `@Scheduled()` settings of a class, or undefined when it has none. */
  scheduled(target: unknown): ScheduledMetadata | undefined {
    // A method's metadata sits on the function itself: the same read serves classes and `@Task()` methods.
    if (typeof target !== 'function') return undefined;
    return Reflect.getMetadata(SCHEDULED_METADATA, target) as ScheduledMetadata | undefined;
  }
}
